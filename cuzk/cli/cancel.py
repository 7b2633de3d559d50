"""``cuzk cancel JOB_ID``: ``DELETE /v1/proofs/{id}`` with the client commands' auth, URL and
retries, and a line that says what became of the job."""

from __future__ import annotations

import argparse
from typing import Any

from cuzk.cli._client import Run, add_client_arguments, describe_server, run_client
from cuzk.cli._http import CliError, Refused
from cuzk.cli._results import job_result, note_job


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "cancel",
        help="cancel a job on the server",
        description="Cancel a job on a running `cuzk serve`: its queued partitions are dropped"
        " and it ends `cancelled` (a partition already on a GPU finishes, its proof unused)."
        " Cancelling a cancelled job again succeeds; a job that already ended otherwise is an"
        " error (exit 1), since nothing was cancelled.",
    )
    p.add_argument("job_id", metavar="JOB_ID", help="the job id `cuzk submit` printed")
    add_client_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = job_result("cancel", describe_server(args))
    result["job_id"] = args.job_id

    def body(r: Run) -> None:
        try:
            job = r.call("DELETE", f"/v1/proofs/{args.job_id}")
        except Refused as e:
            if e.status == 404:
                raise CliError(f"no job {args.job_id} on the server ({e.detail})") from None
            raise
        note_job(result, job)
        state = job.get("state")
        if state != "cancelled":
            why = f" ({job['error']})" if job.get("error") else ""
            raise CliError(f"job {args.job_id} had already ended {state}{why}; nothing to cancel")
        done = result["partitions_done"] or 0
        r.say(f"job {args.job_id} cancelled ({job.get('proof_kind')}, {done} of"
              f" {result['partitions']} partitions had finished)")

    return run_client(args, "cancel", result, body)
