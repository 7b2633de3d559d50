"""One exception hierarchy: the API maps InputError to 4xx, anything else to 5xx."""

from __future__ import annotations


class CuzkError(Exception):
    """Base class; ``str(e)`` is a message fit to show a user."""


class InputError(CuzkError):
    """The caller sent something wrong; nothing in the engine changed because of it."""

    http_status = 400


class FormatError(InputError):
    """A circuit, key or witness file is truncated, corrupt or does not match."""

    http_status = 422

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem
        self.section: int | None = None  # the file section at fault, when one is (API field)


class WitnessError(InputError):
    """Inputs the witness generator rejects (missing, extra, malformed signals; failed asserts)."""

    http_status = 422


class UnknownProofKind(InputError):
    http_status = 404


class UnknownJob(InputError):
    http_status = 404


class RequestConflict(InputError):
    """A ``request_id`` already names a job whose body (kind, priority, inputs) differs."""

    http_status = 409

    def __init__(self, message: str, job_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class RequestTooLarge(InputError):
    """A body whose parsing alone needs more memory than the whole request parse reserve:
    it could never be parsed, so it is refused (413) rather than retried."""

    http_status = 413


class WitnessesNotTaken(InputError):
    """A witness submitted to a server whose prover cannot take one (a cluster)."""

    http_status = 501


class Unavailable(CuzkError):
    """The server cannot take this request now (draining, journal unwritable): a 503,
    with ``Retry-After`` when ``retry_after`` seconds is known."""

    http_status = 503

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MemoryRequestTooLarge(CuzkError):
    """A reservation larger than the whole memory budget: it could never be granted."""


class PartitionTooLarge(MemoryRequestTooLarge):
    """One partition's whole need (its proving key plus its working memory) exceeds a budget:
    no job of that kind could ever run, so it is refused at submit (HTTP 507)."""

    http_status = 507

    def __init__(
        self, proof_kind: str, budget: str, key_bytes: int, working_bytes: int,
        budget_bytes: int, exact: bool = True, fixed_bytes: int = 0,
    ) -> None:
        setting = "engine.memory_budget_bytes" if budget == "host" else \
            "engine.device_memory_budget_bytes"
        how = "" if exact else " (estimated before its key was first loaded)"
        held = f" ({fixed_bytes} of them held for the prover's runtime)" if fixed_bytes else ""
        super().__init__(
            f"a {proof_kind} partition needs {key_bytes + working_bytes} bytes of {budget} "
            f"memory{how}: proving key {key_bytes} + working memory {working_bytes} bytes, but "
            f"the whole {budget} memory budget is {budget_bytes} bytes{held}; raise {setting} or "
            f"use a smaller circuit")
        self.proof_kind = proof_kind
        self.budget = budget
        self.key_bytes = key_bytes
        self.working_bytes = working_bytes
        self.budget_bytes = budget_bytes


class ProofError(CuzkError):
    """A proof failed self-verification: never returned to a client."""


class DeadlineInfeasible(Unavailable):
    """A submit whose deadline cannot be met even at the front of its priority class, for a
    kind whose ``deadline_admission`` is ``reject``: a 503 without ``Retry-After`` (a retry
    here would finish later still) whose body names the deadline and the predicted finish, so
    the client can send the job elsewhere."""

    def __init__(self, proof_kind: str, deadline: float, predicted_finish: float,
                 prior: str | None = None) -> None:
        from datetime import UTC, datetime

        def rfc3339(t: float) -> str:
            return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")

        self.proof_kind = proof_kind
        self.deadline = rfc3339(deadline)
        self.predicted_finish = rfc3339(predicted_finish)
        self.slack_s = round(deadline - predicted_finish, 3)
        super().__init__(
            f"{proof_kind}: the deadline {self.deadline} cannot be met: even at the front of "
            f"its priority class the job is predicted to finish at {self.predicted_finish} "
            f"({-self.slack_s:.3f} s late) given the work already running and queued ahead of "
            "it" + (f" (predicted from a prior: {prior}; no job of the kind measured yet)"
                    if prior else "") + "; send it to another prover", None)


class KeysDirUnwritable(CuzkError):
    """The proving-key cache cannot be created or written (a development key cannot be made
    or cached there)."""

    def __init__(self, directory: object, reason: OSError) -> None:
        why = (
            "it is a file, not a directory" if isinstance(reason, FileExistsError)
            else "a directory above it is a file" if isinstance(reason, NotADirectoryError)
            else reason.strerror or str(reason)
        )
        super().__init__(
            f"cannot write proving keys in {directory}: {why}; point the key cache at a writable"
            " directory (cuzk serve: engine.keys_dir or CUZK_ENGINE_KEYS_DIR; cuzk prove and"
            " keygen: --keys-dir; default: $XDG_CACHE_HOME/cuzk/keys)")
        self.directory = str(directory)


class BackendUnavailable(CuzkError):
    """The compute backend asked for cannot run on this host (``backend = "cuda"`` without a
    usable CUDA device)."""
