"""The command-line options every bench that drives a real ``cuzk serve`` shares (backend, key
cache, seed, JSON output), so a new server bench takes them the same way."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_server_bench_args(p: argparse.ArgumentParser, *, backend: str) -> None:
    """``--backend`` (default ``backend``), ``--keys-dir``, ``--seed``, ``--json``."""
    p.add_argument("--backend", default=backend, choices=["auto", "cpu", "cuda"],
                   help="the server's compute backend (default: %(default)s)")
    p.add_argument("--keys-dir", default=None, help="proving key cache (default: the server's)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed of the load, so two runs send the same (default: %(default)s)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")


def keys_dir(args: argparse.Namespace) -> Path | None:
    """``--keys-dir`` as an absolute path (the server runs in its own working directory)."""
    return Path(args.keys_dir).expanduser().resolve() if args.keys_dir else None
