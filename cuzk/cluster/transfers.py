"""Bytes a partition moves between nodes, read from Ray's own record of its objects (``cuzk
bench cluster`` and the cluster tests; the serving path never builds one).

A partition's steps create four objects: the witness and a/b/c (synthesis, on the node of its
CPU worker), the GPU output (the GPU worker's node) and the proof (finalize, on the witness's
node). For each, Ray's owner (the head) knows the size and, for an object in the object store,
every node holding a copy (``ray.experimental.get_object_locations``):

* in the object store: each copy on a node other than the one that made it was moved there,
  once (a consumer on another node pulled it, or the head fetched it with ``ray.get``);
* under Ray's inline limit (100 KiB) there is no copy to see: the object travels inside the
  calls, from its maker to the head (the call's reply) and from the head to each step it is an
  argument of; each of those hops between two different nodes counts once.

The head re-sends the GPU output *as a value* to finalize (it fetched the points to link the
spans), one more hop when finalize runs on another node than the head. Arguments the head
makes itself (the inputs, W3C carriers, tickets) are not counted. A retried step's objects
count too: they were moved. The log holds every tracked object until :meth:`TransferLog.read`
(so a copy cannot vanish before it is seen); that memory is the bench's, not the server's.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ObjectMove:
    """One object of a partition and the bytes it moved between nodes."""

    name: str  # witness | abc | gpu_output | proof
    size: int
    made_on: str
    held_on: tuple[str, ...]  # nodes with a copy in their object store; () when inline
    moved_bytes: int


@dataclass
class PartitionMoves:
    """What one partition's objects moved (every attempt of each step included)."""

    job_id: str
    partition: int
    objects: list[ObjectMove] = field(default_factory=list)

    @property
    def moved_bytes(self) -> int:
        return sum(o.moved_bytes for o in self.objects)

    def size_of(self, name: str) -> int:
        return sum(o.size for o in self.objects if o.name == name)


@dataclass(frozen=True)
class _Tracked:
    job_id: str
    partition: int
    name: str
    ref: Any
    made_on: str
    sent_to: tuple[str, ...]  # nodes of the steps the head passed the ref to
    resent_to: tuple[str, ...]  # nodes the head sent the object's value to, as a new object


def moved_bytes(size: int, held_on: Sequence[str], made_on: str, head: str,
                sent_to: Sequence[str], resent_to: Sequence[str]) -> int:
    """The bytes one object moved between nodes, by the rules of this module's docstring."""
    if held_on:
        copies = len(set(held_on) - {made_on})
    else:
        copies = int(made_on != head) + sum(1 for n in sent_to if n != head)
    return size * (copies + sum(1 for n in resent_to if n != head))


class TransferLog:
    """The objects of the partitions the executor ran while this log was set on it
    (``ClusterExecutor.transfers``), read once per job."""

    def __init__(self, head_node: str) -> None:
        self.head_node = head_node
        self._lock = threading.Lock()
        self._tracked: list[_Tracked] = []

    def track(self, job_id: str, partition: int, name: str, ref: Any, made_on: str,
              sent_to: Sequence[str] = (), resent_to: Sequence[str] = ()) -> None:
        with self._lock:
            self._tracked.append(_Tracked(job_id, partition, name, ref, made_on,
                                          tuple(sent_to), tuple(resent_to)))

    def read(self, job_id: str, timeout_s: float = 10.0) -> list[PartitionMoves]:
        """The job's partitions in order, each with its objects; the log lets go of them."""
        import ray.experimental

        with self._lock:
            mine = [t for t in self._tracked if t.job_id == job_id]
            self._tracked = [t for t in self._tracked if t.job_id != job_id]
        where = ray.experimental.get_object_locations([t.ref for t in mine],
                                                      timeout_ms=int(timeout_s * 1000))
        parts: dict[int, PartitionMoves] = {}
        for t in mine:
            info = where.get(t.ref)
            if info is None or info.get("object_size") is None:
                raise RuntimeError(f"Ray does not know the size of {t.name} of "
                                   f"{job_id}[{t.partition}] (freed, or not made yet)")
            size = int(info["object_size"])
            held = tuple(sorted(info.get("node_ids") or ()))
            move = ObjectMove(t.name, size, t.made_on, held, moved_bytes(
                size, held, t.made_on, self.head_node, t.sent_to, t.resent_to))
            parts.setdefault(t.partition, PartitionMoves(job_id, t.partition)
                             ).objects.append(move)
        return [parts[i] for i in sorted(parts)]
