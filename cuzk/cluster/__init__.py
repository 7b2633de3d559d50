"""Scale-out on Ray core (``cuzk serve --cluster ADDRESS``; docs/cluster.md).

The head is the ordinary :class:`cuzk.engine.Engine`: one priority queue, one journal, the
memory ledgers. This package only supplies *where* each step runs: a
:class:`~cuzk.cluster.executor.ClusterExecutor` is the engine's prover backend and sends
synthesis and finalization to CPU worker actors and GPU phases to GPU worker actors
(``cuzk.cluster.actors``). Everything that imports ``ray`` lives here; nothing outside this
package imports it, so ``cuzk serve`` without ``--cluster`` never loads Ray.
"""

NAMESPACE = "cuzk"
"""The Ray namespace of cuzk's named (detached) GPU worker actors."""
PREFETCH_DEPTH = 2
"""Partitions dispatched to one GPU worker at a time: one running, one waiting in the actor.
Depth 1 left a 50 ms GPU phase idle half the time (docs/cluster.md); a deeper prefetch would
make a critical partition wait behind more normal ones."""
