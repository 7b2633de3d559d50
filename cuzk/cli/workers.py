"""``cuzk workers pause|resume``: stop and restart the GPU workers taking partitions (for
maintenance), as ``POST /v1/workers/pause`` and ``/resume`` do."""

from __future__ import annotations

import argparse
from typing import Any

from cuzk.cli._client import Run, add_client_arguments, describe_server, run_client
from cuzk.cli._results import workers_result


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "workers",
        help="pause or resume the server's GPU workers",
        description="Pause or resume the GPU workers of a running `cuzk serve`.",
    )
    verbs = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    pause = verbs.add_parser(
        "pause",
        help="stop workers taking partitions",
        description="Stop the GPU workers taking new partitions: those on a GPU finish, the"
        " rest wait in the GPU queue, and submits are still accepted. Undo with `cuzk workers"
        " resume`. Pausing paused workers succeeds.",
    )
    resume = verbs.add_parser(
        "resume",
        help="let paused workers take partitions again",
        description="Let paused GPU workers take partitions again. Resuming running workers"
        " succeeds.",
    )
    for sub, action in ((pause, "pause"), (resume, "resume")):
        add_client_arguments(sub)
        sub.set_defaults(func=run, action=action)


def run(args: argparse.Namespace) -> int:
    command = f"workers {args.action}"
    result = workers_result(command, describe_server(args))

    def body(r: Run) -> None:
        answer = r.call("POST", f"/v1/workers/{args.action}")
        result["workers_paused"] = bool(answer.get("workers_paused"))
        if result["workers_paused"]:
            r.say("GPU workers paused: partitions on a GPU finish, the rest wait"
                  " (cuzk workers resume)")
        else:
            r.say("GPU workers resumed")

    return run_client(args, command, result, body)
