"""Run the real CUDA kernels under the numba CUDA simulator on tiny inputs (a script, not a test).

``NUMBA_ENABLE_CUDASIM=1 python tests/kernels/gpu/sim_checks.py`` prints one JSON object:
check name -> "ok" or the failure. test_gpu_simulator.py runs it in a subprocess because the
simulator switch is read once, when numba.cuda is first imported.
Blocks are 4 threads so that a grid has several blocks and a phase kernel several threads
sharing one tile: indexing and barrier placement are what this checks.
"""

from __future__ import annotations

import json
import os
import random
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
warnings.simplefilter("ignore")  # numpy scalar wrap-around warnings from the simulated limbs


from cuzk.curves import BLS12_381  # noqa: E402
from kernels import ntt as cpu_ntt  # noqa: E402
from kernels import qap  # noqa: E402
from kernels.field import FR  # noqa: E402
from kernels.gpu.launch import Executor  # noqa: E402
from kernels.gpu.ntt import NttEngine  # noqa: E402
from kernels.gpu.runtime import cuda_target  # noqa: E402

R = BLS12_381.r


def _rand(n: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    return FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)]))


def _ex() -> Executor:
    tg = cuda_target()
    assert tg.name == "cudasim", f"expected the simulator, got target {tg.name}"
    return Executor(tg, np, block=4, phase_block=4)


def check_ntt_multipass() -> None:
    """n = 32 with 2-stage passes and 1 coalescing bit: three passes, strided tiles."""
    eng = NttEngine(_ex(), shared_log=3, coalesce_log=1)
    a = _rand(32, 1)
    x = eng.to_limb_major(a)
    assert np.array_equal(eng.from_limb_major(eng.forward(x)), cpu_ntt.fft(a)), "forward"
    assert np.array_equal(eng.from_limb_major(eng.inverse(x)), cpu_ntt.ifft(a)), "inverse"


def check_ntt_single_tile() -> None:
    eng = NttEngine(_ex())
    a = _rand(16, 2)
    assert np.array_equal(eng.from_limb_major(eng.forward(eng.to_limb_major(a))), cpu_ntt.fft(a))


def check_h_pipeline() -> None:
    n = 16
    a, b, c = _rand(n, 3), _rand(n, 4), _rand(n, 5)
    eng = NttEngine(_ex(), shared_log=2, coalesce_log=1)
    got = eng.h_from_abc(eng.to_limb_major(a), eng.to_limb_major(b), eng.to_limb_major(c))
    assert np.array_equal(got, qap.h_evaluations(a, b, c, 4))


CHECKS: dict[str, Callable[[], None]] = {
    name[len("check_"):]: fn for name, fn in list(globals().items()) if name.startswith("check_")
}


def main() -> int:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        print("set NUMBA_ENABLE_CUDASIM=1", file=sys.stderr)
        return 2
    names = sys.argv[1:] or list(CHECKS)
    results = {}
    for name in names:
        try:
            CHECKS[name]()
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc(limit=6)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
