"""The CPU backend: native QAP code for H (numba's kernels where the extension is not built),
native MSMs over the key's mapped points, whole MSMs on a pool sized to the cores
(``cuzk.prover.cpu_schedule``); py_arkworks_bls12381's multiexp where the native extension is not
built."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
from py_arkworks_bls12381 import G1Point

from cuzk import progress
from cuzk.prover import native_msm, qap
from cuzk.prover.cpu_schedule import G2_COST, LongestFirst, Task, cores

if TYPE_CHECKING:
    from cuzk.prover.keys import ProvingKey


class CpuBackend:
    name = "cpu"
    device = "cpu"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or cores()

    @staticmethod
    def warm_up() -> None:
        """Run every CPU kernel a proof runs (A, B, C on the domain, the coset NTTs, the H
        join) on a two-constraint system at start: where they are numba's (no native extension),
        numba compiles them (or loads its cache) then, tens of seconds on a fresh volume that a
        first job's deadline cannot pay; the native code only proves that it loads and runs."""
        log_n = 2
        witness = np.zeros((2, 8), np.uint32)
        witness[0, 0] = 1
        index = np.arange(2, dtype=np.uint32)
        a, b, c = qap.build_abc(index, index, index, np.zeros((2, 8), np.uint32), witness,
                                1 << log_n)
        qap.h_evaluations(a, b, c, log_n)

    def upload_key(self, key: ProvingKey) -> int:
        return 0

    def drop_key(self, key: ProvingKey) -> None:
        return None

    def h_evaluations(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray
    ) -> np.ndarray:
        return qap.h_evaluations(a, b, c, key.sizes.log_domain)

    def msm_g1(self, key: ProvingKey, section: str, scalars: np.ndarray) -> G1Point:
        return key.msm_g1(section, scalars)

    def scheduled(self) -> bool:
        """Whole-MSM scheduling needs MSMs that release the GIL for their whole run (native)."""
        return native_msm.available()

    def all_msms(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray, witness: np.ndarray
    ) -> dict[str, Any]:
        """A, B1, C, H (G1) and B2 (G2), longest first on the pool, H's NTT on this thread."""
        pool = LongestFirst(self.workers)
        w = witness
        wc = w[key.sizes.n_public + 1 :]
        done = _Countdown(progress.current(), 5)  # the pool's threads report through it
        try:
            def b2(threads: int) -> Any:
                return done(key.msm_b2(w, threads), "B2")

            progress.step("MSMs A, B1, C, B2 with H's NTT")
            pool.add(Task("B2", G2_COST * key.msm_points("B2"), b2))
            for name, scalars in (("C", wc), ("A", w), ("B1", w)):
                pool.add(Task(name, float(key.msm_points(name)),
                              functools.partial(_msm_g1, key, name, scalars, done)))
            h = self.h_evaluations(key, a, b, c)
            pool.add(Task("H", float(key.msm_points("H")),
                          lambda t: done(key.msm_g1("H", h, t), "H")), last=True)
        finally:
            results = pool.join()
        return results


def _msm_g1(key: Any, name: str, scalars: Any, done: _Countdown, threads: int) -> Any:
    """One G1 MSM of the key's ``name`` section, a task of the longest-first pool."""
    return done(key.msm_g1(name, scalars, threads), name)


class _Countdown:
    """Reports each MSM of the pool as it ends ("MSM B1 done, 2/5"), from whichever thread."""

    def __init__(self, sink: progress.Sink, total: int) -> None:
        self._sink, self._total, self._done = sink, total, 0
        self._lock = threading.Lock()

    def __call__(self, result: Any, name: str) -> Any:
        with self._lock:
            self._done += 1
            self._sink(f"MSM {name} done, {self._done}/{self._total}")
        return result
