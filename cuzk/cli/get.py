"""``cuzk get``: fetch a job's proofs again (``cuzk submit`` could not write them, or the job was
submitted with ``--no-wait`` or by another client)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cuzk.cli._http import CliError, add_server_argument, make_client, request_retrying
from cuzk.cli._output import check_output_dir, error_console, plural
from cuzk.cli.submit import RETRY_FOR_SECONDS, out_dir_for, write_proofs
from cuzk.errors import CuzkError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "get",
        help="write a finished job's proofs (again)",
        description="Fetch a job from a running `cuzk serve` and write proof_<i>.json /"
        " public_<i>.json (snarkjs formats) for each partition, as `cuzk submit` does.",
    )
    p.add_argument("job_id", metavar="JOB_ID", help="the job id `cuzk submit` printed")
    add_server_argument(p)
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
        help="wait up to this long for an unfinished job (default: do not wait)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = error_console()
    out_dir = out_dir_for(args.out, args.job_id)
    try:
        check_output_dir(out_dir, "--out")
        with make_client(args.server, token_file=args.token_file,
                         timeout=30.0 + args.wait) as client:
            params = {"wait": args.wait} if args.wait > 0 else None
            job = request_retrying(client, "GET", f"/v1/proofs/{args.job_id}",
                                   RETRY_FOR_SECONDS, params=params)
        if job["state"] != "succeeded":
            why = f": {job['error']}" if job.get("error") else ""
            raise CliError(f"job {args.job_id} is {job['state']}{why}; it has no proofs to write")
        written = write_proofs(job, out_dir)
    except (CliError, CuzkError) as e:
        console.print(f"[bold red]cuzk get:[/] {e}", highlight=False)
        return 1
    print(f"job {args.job_id}: {plural(len(written) // 2, 'proof')} written to {out_dir}",
          file=sys.stdout)
    return 0
