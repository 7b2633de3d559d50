"""``cuzk keys preload|evict KIND``: make a proof kind's proving key resident before its first
job, or free its memory, as ``POST /v1/keys/{kind}/preload`` and ``DELETE /v1/keys/{kind}`` do."""

from __future__ import annotations

import argparse
from typing import Any

from cuzk.cli._client import Run, add_client_arguments, describe_server, run_client
from cuzk.cli._output import human_bytes
from cuzk.cli._results import key_result

PRELOAD_TIMEOUT_SECONDS = 600.0
"""A large key takes minutes to read, check and upload; the answer comes once it is resident."""

EVICTED = {
    "evicted": "evicted: its memory is free",
    "deferred": "in use: evicted as soon as its running partitions end",
    "not_resident": "was not resident; nothing to evict",
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "keys",
        help="preload or evict a proving key on the server",
        description="Load a proof kind's proving key into a running `cuzk serve` before its"
        " first job, or evict it to free its memory.",
    )
    verbs = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    preload = verbs.add_parser(
        "preload",
        help="make a proving key resident now",
        description="Make KIND's proving key resident now (read, checked, uploaded), so its"
        " first job does not wait for it; answers once it is resident.",
    )
    evict = verbs.add_parser(
        "evict",
        help="free a resident proving key's memory",
        description="Evict KIND's proving key: at once when idle, else as soon as its running"
        " partitions end. The next job of KIND loads it again.",
    )
    for sub, action in ((preload, "preload"), (evict, "evict")):
        sub.add_argument("proof_kind", metavar="KIND", help="proof kind, e.g. porep-c2")
        add_client_arguments(sub)
        sub.set_defaults(func=run, action=action)
    preload.add_argument(
        "--timeout",
        type=float,
        default=PRELOAD_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="how long to wait for the key to be resident (default: %(default)g)",
    )


def run(args: argparse.Namespace) -> int:
    command = f"keys {args.action}"
    kind = args.proof_kind
    result = key_result(command, describe_server(args), kind)

    def body(r: Run) -> None:
        if args.action == "preload":
            answer = r.call("POST", f"/v1/keys/{kind}/preload")
            result["resident"] = bool(answer.get("resident"))
            result["host_bytes"] = answer.get("host_bytes")
            size = answer.get("host_bytes")
            r.say(f"proving key of {kind} resident"
                  + (f" ({human_bytes(size)} of host memory)" if size else ""))
        else:
            answer = r.call("DELETE", f"/v1/keys/{kind}")
            outcome = answer.get("result")
            result["evict_result"] = outcome
            result["resident"] = outcome == "deferred"
            r.say(f"proving key of {kind} {EVICTED.get(str(outcome), str(outcome))}")

    timeout = getattr(args, "timeout", None) or 30.0
    return run_client(args, command, result, body, timeout=timeout)
