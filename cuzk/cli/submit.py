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

from cuzk.cli._http import CliError, add_server_argument, make_client, request, request_retrying
from cuzk.cli._output import check_output_dir, error_console, plural, write_text
from cuzk.errors import CuzkError
from cuzk.protocol import PRIORITIES, TERMINAL_STATES

POLL_WAIT_SECONDS = 0.5
"""Each poll long-polls this long, so completion is seen at once and progress twice a second."""
RETRY_FOR_SECONDS = 120.0
"""How long submit and its polls ride out a server that cannot answer now (a drain, a
restart, a 503 with Retry-After) before giving up."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "submit",
        help="submit a proof job and wait for its proofs",
        description="Submit a proof job to a running `cuzk serve`, show partitions completing,"
        " and write proof_<i>.json / public_<i>.json (snarkjs formats) for each partition.",
    )
    p.add_argument("proof_kind", metavar="KIND", help="proof kind, e.g. porep-c2")
    p.add_argument(
        "--input",
        metavar="FILE",
        default=None,
        help="JSON inputs: an array with one object per partition, or one object used for"
        " every partition (default: the bundled sample input for KIND, once per partition)",
    )
    add_server_argument(p)
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
        "--retry-for",
        type=float,
        default=RETRY_FOR_SECONDS,
        metavar="SECONDS",
        help="keep retrying this long while the server is draining, restarting or answers 503"
        " (default: %(default)g; 0: never retry)",
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
    console = error_console()
    try:
        with make_client(args.server, token_file=args.token_file) as client:
            return submit(client, args, console=console, out=sys.stdout)
    except (CliError, CuzkError) as e:
        console.print(f"[bold red]cuzk submit:[/] {e}", highlight=False)
        return 1


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


def write_proofs(job: dict[str, Any], out_dir: Path) -> list[Path]:
    """proof_<i>.json and public_<i>.json per partition, as snarkjs writes them."""
    check_output_dir(out_dir, "--out")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, entry in enumerate(job.get("proofs") or []):
        for name, key in (("proof", "proof"), ("public", "public")):
            path = out_dir / f"{name}_{i}.json"
            write_text(path, json.dumps(entry[key], indent=1) + "\n", "--out")
            written.append(path)
    return written


def out_dir_for(out: str | None, job_id: str) -> Path:
    return Path(out) if out else Path("proofs") / job_id


def submit(
    client: httpx.Client,
    args: argparse.Namespace,
    console: Console,
    out: Any = None,
) -> int:
    """The whole command over a given client (tests pass one bound to an in-process app)."""
    out = out or sys.stdout
    # Where the proofs go is checked before the job exists, not after it has run.
    check_output_dir(Path(args.out) if args.out else Path("proofs"), "--out")
    # So is the deadline: a bad one is said at once, not after the server was asked.
    deadline = deadline_text(args.deadline) if getattr(args, "deadline", None) else None
    retry_for = float(getattr(args, "retry_for", RETRY_FOR_SECONDS))
    retried: list[str] = []

    def on_retry(why: str) -> None:
        if not retried:  # said once, not at every try
            console.print(f"cuzk submit: {why}; retrying for up to {retry_for:g} s",
                          highlight=False)
        retried.append(why)

    def call(method: str, path: str, **kwargs: Any) -> Any:
        return request_retrying(client, method, path, retry_for, on_retry, **kwargs)

    entry = _kind_entry(client, args.proof_kind, call)
    partitions = int(entry.get("partitions") or 1)
    inputs = build_inputs(args.proof_kind, partitions, args.input, client)
    # Always a request id: a submit retried after a dropped connection finds its first job.
    request_id = args.request_id or f"cuzk-submit-{uuid.uuid4().hex}"
    body: dict[str, Any] = {"proof_kind": args.proof_kind, "inputs": inputs,
                            "request_id": request_id}
    if args.priority:
        body["priority"] = args.priority
    if deadline is not None:
        body["deadline"] = deadline
    job = call("POST", "/v1/proofs", json=body)
    job_id = job["id"]
    print(f"job {job_id} accepted ({args.proof_kind}, {plural(partitions, 'partition')};"
          f" request id {request_id})", file=out)
    if args.no_wait:
        return 0

    started = time.monotonic()
    try:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("partitions"),
            TextColumn("{task.fields[state]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task(
                args.proof_kind, total=partitions, completed=_done(job), state=job["state"]
            )
            while job["state"] not in TERMINAL_STATES:
                if args.timeout is not None and time.monotonic() - started > args.timeout:
                    progress.stop()
                    raise CliError(
                        f"gave up after {args.timeout:g} s; job {job_id} continues on the"
                        f" server (state {job['state']})"
                    )
                job = call(
                    "GET",
                    f"/v1/proofs/{job_id}",
                    params={"wait": POLL_WAIT_SECONDS},
                    timeout=POLL_WAIT_SECONDS + 30,
                )
                progress.update(task, completed=_done(job), state=job["state"])
    except KeyboardInterrupt:
        console.print(
            f"stopped waiting; job {job_id} continues on the server"
            f" (cancel it with DELETE /v1/proofs/{job_id})"
        )
        return 130

    elapsed = time.monotonic() - started
    if job["state"] != "succeeded":
        why = f": {job['error']}" if job.get("error") else ""
        console.print(f"[bold red]job {job_id} {job['state']}[/]{why}", highlight=False)
        return 1
    out_dir = out_dir_for(args.out, job_id)
    try:
        write_proofs(job, out_dir)
    except CuzkError as e:
        raise CliError(f"{e}; the proofs stay on the server: cuzk get {job_id} --out DIR") from None
    count = len(job.get("proofs") or [])
    print(
        f"job {job_id} succeeded in {elapsed:.1f} s: {plural(count, 'proof')} written to"
        f" {out_dir}",
        file=out,
    )
    return 0
