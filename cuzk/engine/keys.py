"""Proving-key residency: one key per proof kind, loaded once, kept until evicted.

A resident key holds permanent, evictable reservations (host, and each device on a GPU
backend). Partitions pin the key while they use it; the budget evicts only unpinned keys.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from cuzk.engine.backend import KeyHandle, ProverBackend
from cuzk.engine.memory import MemoryBudget, Reservation

CONSUMER = "proving_key"


@dataclass
class ResidentKey:
    proof_kind: str
    handle: KeyHandle
    reservations: list[Reservation]
    device_bytes: dict[str, int]
    loaded_at: float = field(default_factory=time.time)
    evict_requested: bool = False

    @property
    def host_bytes(self) -> int:
        return self.handle.host_bytes


class KeyResidency:
    def __init__(
        self,
        prover: ProverBackend,
        host_budget: MemoryBudget,
        device_budgets: dict[str, MemoryBudget],
    ) -> None:
        self._prover = prover
        self._host = host_budget
        self._devices = device_budgets
        self._lock = threading.Lock()
        self._kind_locks: dict[str, threading.Lock] = {}
        self._resident: dict[str, ResidentKey] = {}
        self.loads: dict[str, int] = {}

    def _kind_lock(self, kind: str) -> threading.Lock:
        with self._lock:
            return self._kind_locks.setdefault(kind, threading.Lock())

    # ---- use -------------------------------------------------------------------------------

    def acquire(self, kind: str, priority: str = "normal") -> ResidentKey:
        """The resident key for ``kind``, pinned; loads it (once) if needed. Pair with release."""
        with self._kind_lock(kind):
            with self._lock:
                rk = self._resident.get(kind)
            if rk is not None and self._pin(rk):
                return rk
            return self._load(kind, priority)

    def release(self, rk: ResidentKey) -> None:
        """Unpin; a key whose eviction was requested while in use goes now."""
        for r in rk.reservations:
            if not r.closed:
                r.budget.unpin(r)
        if rk.evict_requested and not self._pinned(rk):
            self._drop(rk)

    def _pin(self, rk: ResidentKey) -> bool:
        done: list[Reservation] = []
        for r in rk.reservations:
            if not r.budget.pin(r):
                for d in done:
                    d.budget.unpin(d)
                return False
            done.append(r)
        return True

    @staticmethod
    def _pinned(rk: ResidentKey) -> bool:
        return any(r.pins > 0 for r in rk.reservations if not r.closed)

    def _load(self, kind: str, priority: str) -> ResidentKey:
        hint = int(self._prover.key_bytes_hint(kind))
        held: list[Reservation] = []
        holder: list[ResidentKey] = []

        def evicted(_: Reservation) -> None:
            if holder:
                self._drop(holder[0])

        def reserve(budget: MemoryBudget, nbytes: int) -> None:
            held.append(
                budget.reserve(nbytes, CONSUMER, priority, evictable=True, on_evict=evicted,
                               pinned=True)
            )

        try:
            reserve(self._host, hint)
            handle = self._prover.load_key(kind)
            if handle.host_bytes < hint:
                held[0].release(hint - handle.host_bytes)
            elif handle.host_bytes > hint:
                reserve(self._host, handle.host_bytes - hint)
            for budget in self._devices.values():
                if handle.device_bytes:
                    reserve(budget, handle.device_bytes)
        except BaseException:
            for r in held:
                r.budget._release_rest(r)
            raise
        rk = ResidentKey(kind, handle, held,
                         {d: handle.device_bytes for d in self._devices} if self._devices else {})
        holder.append(rk)
        with self._lock:
            self._resident[kind] = rk
            self.loads[kind] = self.loads.get(kind, 0) + 1
        return rk

    def _drop(self, rk: ResidentKey) -> None:
        with self._lock:
            if self._resident.get(rk.proof_kind) is rk:
                del self._resident[rk.proof_kind]
            else:
                return
        for r in rk.reservations:
            r.budget._release_rest(r)
        self._prover.unload_key(rk.handle)

    # ---- operator actions ------------------------------------------------------------------

    def preload(self, kind: str, priority: str = "normal") -> ResidentKey:
        rk = self.acquire(kind, priority)
        self.release(rk)
        return rk

    def evict(self, kind: str) -> str:
        """'evicted', 'deferred' (in use: goes when the last user is done) or 'not_resident'."""
        with self._kind_lock(kind):
            with self._lock:
                rk = self._resident.get(kind)
            if rk is None:
                return "not_resident"
            if self._pinned(rk):
                rk.evict_requested = True
                if self._pinned(rk):
                    return "deferred"
            self._drop(rk)
            return "evicted"

    def evict_all(self) -> None:
        with self._lock:
            keys = list(self._resident.values())
        for rk in keys:
            self._drop(rk)

    # ---- reads -----------------------------------------------------------------------------

    def resident(self) -> list[ResidentKey]:
        with self._lock:
            return list(self._resident.values())

    def is_resident(self, kind: str) -> bool:
        with self._lock:
            return kind in self._resident

    def snapshot(self) -> list[dict]:
        out = []
        now = time.monotonic()
        for rk in self.resident():
            out.append(
                {
                    "proof_kind": rk.proof_kind,
                    "host_bytes": rk.host_bytes,
                    "device_bytes": dict(rk.device_bytes),
                    "in_use": sum(r.pins for r in rk.reservations[:1]),
                    "idle_s": round(
                        now - max((r.last_used for r in rk.reservations), default=now), 3),
                    "loaded_at": rk.loaded_at,
                    "evict_requested": rk.evict_requested,
                }
            )
        return out
