"""Engine benchmark entry point: ``python benchmarks/bench_engine.py [--prover scripted]``.

Same as ``cuzk bench engine``; see cuzk/engine/bench.py for what each figure means.
"""

from __future__ import annotations

import argparse
import json
import sys

from cuzk.engine.bench import run_engine_bench


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--prover", choices=["auto", "real", "scripted"], default="auto")
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="scripted step-time multiplier")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    figures = run_engine_bench(prover=args.prover, jobs=args.jobs, repeats=args.repeats,
                               seed=args.seed, scale=args.scale)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
