"""Engine benchmark: ``python benchmarks/bench_engine.py [--prover scripted] ...``.

The same as ``cuzk bench engine`` (see cuzk/bench/engine.py for what each figure means).
"""

from __future__ import annotations

import sys

from cuzk.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", "engine", *sys.argv[1:]]))
