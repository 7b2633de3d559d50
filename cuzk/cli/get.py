"""``cuzk get``: fetch a job's proofs again (``cuzk submit`` could not write them, or the job was
submitted with ``--no-wait`` or by another client)."""

from __future__ import annotations

import argparse
from typing import Any

from cuzk.cli._client import Run, add_client_arguments, describe_server, run_client
from cuzk.cli._http import CliError, Refused
from cuzk.cli._output import check_output_dir, plural
from cuzk.cli._results import job_result, note_job
from cuzk.cli.submit import follow, out_dir_for, write_proofs
from cuzk.protocol import TERMINAL_STATES


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "get",
        help="write a finished job's proofs (again)",
        description="Fetch a job from a running `cuzk serve` and write proof_<i>.json /"
        " public_<i>.json (snarkjs formats) for each partition, as `cuzk submit` does.",
    )
    p.add_argument("job_id", metavar="JOB_ID", help="the job id `cuzk submit` printed")
    add_client_arguments(p)
    p.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="directory for the proof files (default: ./proofs/<job id>)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for an unfinished job, showing its partitions finish"
        " (default: do not wait)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out_dir = out_dir_for(args.out, args.job_id)
    result = job_result("get", describe_server(args))
    result["job_id"] = args.job_id

    def body(r: Run) -> int:
        check_output_dir(out_dir, "--out")
        try:
            job = r.call("GET", f"/v1/proofs/{args.job_id}")
        except Refused as e:
            if e.status == 404:
                raise CliError(f"no job {args.job_id} on the server ({e.detail})") from None
            raise
        note_job(result, job)
        if args.wait > 0 and job["state"] not in TERMINAL_STATES:
            try:
                job = follow(r.call, job, str(job.get("proof_kind", "")),
                             len(job.get("partitions") or []) or 1, r.console, args.wait,
                             show=not r.json, result=result)
            except KeyboardInterrupt:
                r.console.print(f"stopped waiting; job {args.job_id} continues on the server",
                                highlight=False)
                return 130
        if job["state"] != "succeeded":
            why = f": {job['error']}" if job.get("error") else ""
            more = "" if job["state"] in TERMINAL_STATES else " yet (wait for it: --wait SECONDS)"
            raise CliError(f"job {args.job_id} is {job['state']}{why}; it has no proofs to"
                           f" write{more}")
        written = write_proofs(job, out_dir, result)
        r.say(f"job {args.job_id}: {plural(len(written) // 2, 'proof')} written to {out_dir}")
        return 0

    return run_client(args, "get", result, body)
