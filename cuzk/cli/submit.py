"""``cuzk submit``: send a proof job, show its partitions completing, write the proofs."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from cuzk.cli._client import Run, add_client_arguments, describe_server, run_client
from cuzk.cli._http import RETRY_FOR_SECONDS, CliError, request, retrying_caller
from cuzk.cli._output import check_output_dir, now_running, plural, write_text
from cuzk.cli._results import JobResult, job_result, note_job
from cuzk.cli._witness_body import WitnessBody, check_count
from cuzk.errors import CuzkError
from cuzk.protocol import PRIORITIES, TERMINAL_STATES, WITNESS_MEDIA_TYPE, WITNESS_SUBMIT_PATH

POLL_WAIT_SECONDS = 0.5
"""Each poll long-polls this long, so completion is seen at once and progress twice a second."""
__all__ = ["RETRY_FOR_SECONDS", "follow", "submit", "write_proofs"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "submit",
        help="submit a proof job and wait for its proofs",
        description="Submit a proof job to a running `cuzk serve`, show partitions completing,"
        " and write proof_<i>.json / public_<i>.json (snarkjs formats) for each partition.",
    )
    p.add_argument("proof_kind", metavar="KIND", help="proof kind, e.g. porep-c2")
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--input",
        metavar="FILE",
        default=None,
        help="JSON inputs: an array with one object per partition, or one object used for"
        " every partition (default: the bundled sample input for KIND, once per partition)",
    )
    source.add_argument(
        "--wtns",
        metavar="FILE",
        nargs="+",
        type=Path,
        default=None,
        help="ready witnesses instead of inputs, one .wtns per partition in partition order"
        " (from circom's native C++ generator, snarkjs wtns calculate, ...): the server runs"
        " no witness generator and checks each against KIND's circuit",
    )
    add_client_arguments(p)
    p.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="directory for the proof files (default: ./proofs/<job id>)",
    )
    p.add_argument(
        "--request-id",
        default=None,
        help="idempotency key: a repeat returns the same job (default: a new random one, so a"
        " retried submit never makes a second job)",
    )
    p.add_argument(
        "--priority",
        choices=PRIORITIES,
        default=None,
        help="scheduling class, most urgent first: {%(choices)s}; a job of a more urgent class"
        " is served before any queued job of a less urgent one (default: the proof kind's"
        " configured priority, normal unless set)",
    )
    p.add_argument(
        "--deadline",
        metavar="WHEN",
        default=None,
        help="when the proofs are needed: an RFC 3339 time (2026-12-01T16:30:00Z) or a"
        " duration from now (30s, 25m, 1h); default: the kind's configured deadline, if any",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop waiting after this long (the job keeps running on the server)",
    )
    p.add_argument("--no-wait", action="store_true", help="print the job id once accepted and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = job_result("submit", describe_server(args))

    def body(r: Run) -> int:
        return submit(r.client, args, console=r.console, out=sys.stdout, result=result)

    return run_client(args, "submit", result, body)


def _kind_entry(
    client: httpx.Client, kind: str, call: Callable[..., Any] | None = None
) -> dict[str, Any]:
    get = call or (lambda method, path: request(client, method, path))
    circuits = get("GET", "/v1/circuits").get("circuits", [])
    for entry in circuits:
        if entry.get("proof_kind", entry.get("name")) == kind:
            return entry
    names = ", ".join(str(c.get("proof_kind", c.get("name"))) for c in circuits) or "none"
    raise CliError(f"the server has no proof kind {kind!r} (available: {names})")


def _sample_input(client: httpx.Client, kind: str) -> dict[str, Any]:
    """The kind's example input: the server's (its config's ``sample_input``), else the bundled
    circuit's, for trying the server without writing inputs."""
    try:
        response = client.get(f"/v1/circuits/{kind}/sample_input")
    except httpx.HTTPError:
        response = None
    if response is not None and response.status_code == 200:
        try:
            data = response.json()
        except ValueError:
            data = None
        if isinstance(data, dict):
            return data
    from cuzk.circuits.registry import bundled_circuits

    found = bundled_circuits()
    for c in found.values() if isinstance(found, dict) else found:
        if c.proof_kind == kind and getattr(c, "sample_input_path", None):
            return _read_json(Path(c.sample_input_path))
    raise CliError(
        f"proof kind {kind!r} has no sample input (set sample_input in its [proof_kinds.{kind}]"
        " table); pass --input FILE"
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise CliError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}") from None


def build_inputs(
    kind: str, partitions: int, input_path: str | None, client: httpx.Client | None = None
) -> list[dict[str, Any]]:
    if input_path:
        data = _read_json(Path(input_path))
    elif client is not None:
        data = _sample_input(client, kind)
    else:
        raise CliError(f"pass --input FILE for {kind!r}")
    if isinstance(data, dict):
        return [data] * partitions
    if isinstance(data, list) and all(isinstance(x, dict) for x in data):
        if len(data) != partitions:
            raise CliError(
                f"{input_path}: {len(data)} partition inputs, but {kind!r} takes {partitions}"
            )
        return data
    raise CliError(f"{input_path}: expected a JSON object or an array of objects")


def deadline_text(value: str, now: float | None = None) -> str:
    """``--deadline``: an RFC 3339 time as given (checked), or a duration from now (as UTC)."""
    from datetime import UTC, datetime

    from cuzk.settings_schema import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError:
        pass
    else:
        at = (time.time() if now is None else now) + seconds
        try:
            return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
        except (OverflowError, OSError, ValueError):  # past the year 9999 / the platform's time_t
            raise CliError(
                f"--deadline {value!r}: {seconds:g} s from now is past the latest time there is"
                " (the year 9999); servers refuse deadlines beyond their horizon"
                " (engine.deadline_horizon)") from None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise CliError(
            f"--deadline {value!r}: give an RFC 3339 time with its offset"
            " (2026-12-01T16:30:00Z) or a duration such as 30s, 25m or 1h")
    return when.isoformat()


def _done(job: dict[str, Any]) -> int:
    parts = job.get("partitions")
    if isinstance(parts, list):
        return sum(1 for p in parts if isinstance(p, dict) and p.get("phase") == "done")
    return 0


def activity(job: dict[str, Any]) -> str:
    """The job's state and what runs now ("running · p2 proving: MSM B1 done, 2/5")."""
    state = str(job.get("state", ""))
    now = now_running(job)
    return f"{state} · {now}" if now and state not in TERMINAL_STATES else state


def write_proofs(
    job: dict[str, Any], out_dir: Path, result: JobResult | None = None
) -> list[Path]:
    """proof_<i>.json and public_<i>.json per partition, as snarkjs writes them; each pair is
    listed in ``result`` once written."""
    check_output_dir(out_dir, "--out")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, entry in enumerate(job.get("proofs") or []):
        pair = []
        for name, key in (("proof", "proof"), ("public", "public")):
            path = out_dir / f"{name}_{i}.json"
            write_text(path, json.dumps(entry[key], indent=1) + "\n", "--out")
            written.append(path)
            pair.append(str(path))
        if result is not None:
            result["out_dir"] = str(out_dir)
            result["proofs"].append({"partition": i, "proof": pair[0], "public": pair[1]})
    return written


def out_dir_for(out: str | None, job_id: str) -> Path:
    return Path(out) if out else Path("proofs") / job_id


def submit(
    client: httpx.Client,
    args: argparse.Namespace,
    console: Console,
    out: Any = None,
    result: JobResult | None = None,
) -> int:
    """The whole command over a given client (tests pass one bound to an in-process app);
    ``result`` records what happened for ``--json``."""
    out = out or sys.stdout
    result = result if result is not None else job_result("submit", str(client.base_url))
    quiet = bool(getattr(args, "json", False))  # stdout is the JSON object; no bar either
    # Where the proofs go is checked before the job exists, not after it has run.
    check_output_dir(Path(args.out) if args.out else Path("proofs"), "--out")
    # So is the deadline: a bad one is said at once, not after the server was asked.
    deadline = deadline_text(args.deadline) if getattr(args, "deadline", None) else None
    retry_for = float(getattr(args, "retry_for", RETRY_FOR_SECONDS))
    call = retrying_caller(client, retry_for, lambda text: console.print(
        f"cuzk submit: {text}", highlight=False, markup=False))

    witnesses = getattr(args, "wtns", None)
    wtns_body = WitnessBody(witnesses) if witnesses else None  # a missing file: said first
    entry = _kind_entry(client, args.proof_kind, call)
    partitions = int(entry.get("partitions") or 1)
    # Always a request id: a submit retried after a dropped connection finds its first job.
    request_id = args.request_id or f"cuzk-submit-{uuid.uuid4().hex}"
    result["request_id"], result["proof_kind"] = request_id, args.proof_kind
    fields: dict[str, Any] = {"proof_kind": args.proof_kind, "request_id": request_id}
    if args.priority:
        fields["priority"] = args.priority
    if deadline is not None:
        fields["deadline"] = deadline
    if wtns_body is not None:
        check_count(wtns_body, args.proof_kind, partitions)
        job = call("POST", WITNESS_SUBMIT_PATH, params=fields, content=wtns_body,
                   headers={"Content-Type": WITNESS_MEDIA_TYPE,
                            "Content-Length": str(wtns_body.size)})
    else:
        inputs = build_inputs(args.proof_kind, partitions, args.input, client)
        job = call("POST", "/v1/proofs", json={**fields, "inputs": inputs})
    note_job(result, job)
    job_id = job["id"]
    if not quiet:
        source = "; from witnesses" if wtns_body is not None else ""
        print(f"job {job_id} accepted ({args.proof_kind}, {plural(partitions, 'partition')}"
              f"{source}; request id {request_id})", file=out)
    if args.no_wait:
        return 0

    started = time.monotonic()
    try:
        job = follow(call, job, args.proof_kind, partitions, console, args.timeout,
                     show=not quiet, result=result)
    except KeyboardInterrupt:
        console.print(f"stopped waiting; job {job_id} continues on the server (cuzk cancel"
                      f" {job_id} cancels it)", highlight=False)
        return 130
    if job["state"] not in TERMINAL_STATES:
        raise CliError(f"gave up after {args.timeout:g} s; job {job_id} continues on the"
                       f" server (state {job['state']})")
    elapsed = time.monotonic() - started
    if job["state"] != "succeeded":
        why = f": {job['error']}" if job.get("error") else ""
        console.print(f"[bold red]job {job_id} {job['state']}[/]{why}", highlight=False)
        result["error"] = f"job {job_id} {job['state']}{why}"
        return 1
    out_dir = out_dir_for(args.out, job_id)
    try:
        write_proofs(job, out_dir, result)
    except CuzkError as e:
        raise CliError(f"{e}; the proofs stay on the server: cuzk get {job_id} --out DIR") from None
    count = len(job.get("proofs") or [])
    if not quiet:
        print(f"job {job_id} succeeded in {elapsed:.1f} s: {plural(count, 'proof')} written to"
              f" {out_dir}", file=out)
    return 0


def follow(
    call: Callable[..., Any],
    job: dict[str, Any],
    kind: str,
    partitions: int,
    console: Console,
    timeout: float | None,
    show: bool = True,
    result: JobResult | None = None,
) -> dict[str, Any]:
    """Poll a job until it ends or ``timeout`` seconds pass (then it is returned unfinished),
    drawing partitions done on ``console`` when ``show``; ``submit`` and ``get --wait``."""
    started = time.monotonic()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("partitions"),
        TextColumn("{task.fields[state]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not show,
    ) as progress:
        task = progress.add_task(kind, total=partitions, completed=_done(job),
                                 state=activity(job))
        while job["state"] not in TERMINAL_STATES:
            left = None if timeout is None else timeout - (time.monotonic() - started)
            if left is not None and left <= 0:
                break
            wait = POLL_WAIT_SECONDS if left is None else max(0.0, min(POLL_WAIT_SECONDS, left))
            job = call("GET", f"/v1/proofs/{job['id']}", params={"wait": wait},
                       timeout=wait + 30)
            if result is not None:
                note_job(result, job)
            progress.update(task, completed=_done(job), state=activity(job))
    return job
