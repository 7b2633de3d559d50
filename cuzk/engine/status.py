"""The JSON status snapshot (GET /v1/status, ``cuzk status``), computed when asked."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuzk.engine.engine import Engine

RECENT_JOBS = 50


def build_status(engine: Engine) -> dict:
    """Workers, jobs (live and recent), memory, keys and counters, read from current state."""
    pipeline = engine.pipeline
    live = engine._live_jobs()
    finished = [j for j in engine.jobs() if j.terminal and j.id not in {x.id for x in live}]
    finished.sort(key=lambda j: j.finished_at or 0.0, reverse=True)
    jobs = [j.to_dict() for j in sorted(live, key=lambda j: j.seq)]
    jobs += [j.to_dict() for j in finished[:RECENT_JOBS]]
    devices = {name: b.snapshot() for name, b in engine.device_budgets.items()}
    return {
        "time": time.time(),
        "backend": engine.prover.name,
        "paused": pipeline.gpu_queue.paused,
        "queues": {
            "pending": len(pipeline.pending),
            "gpu": len(pipeline.gpu_queue),
            "finalize": len(pipeline.fin_queue),
        },
        "workers": [w.snapshot() for w in pipeline.workers],
        "jobs": jobs,
        "memory": {**engine.host_budget.snapshot(), "devices": devices},
        "keys": engine.keys.snapshot(),
        "spans_open": len(engine.spans.open_spans()),  # 0 when idle: a leak check from outside
        "counters": {
            "jobs_submitted": engine.counters.get("jobs_submitted"),
            "jobs_completed": {
                f"{kind}/{status}": n
                for (kind, status), n in engine.counters.get("jobs_completed").items()  # type: ignore[misc]
            },
            "worker_partitions": {
                f"{w}/{kind}": n
                for (w, _d, kind), n in engine.counters.get("worker_partitions").items()  # type: ignore[misc]
            },
        },
    }
