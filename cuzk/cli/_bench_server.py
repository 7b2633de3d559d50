"""What every bench that drives a real ``cuzk serve`` shares: its command-line options (backend,
key cache, seed, JSON output) and the bundled sample inputs it submits, so a new server bench
takes them the same way."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


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


def sample_inputs(kind: str) -> dict[str, Any]:
    """The bundled sample input of a proof kind (one partition's signals)."""
    from cuzk.circuits.registry import bundled_circuits

    return json.loads(Path(bundled_circuits()[kind].sample_input_path).read_text())
