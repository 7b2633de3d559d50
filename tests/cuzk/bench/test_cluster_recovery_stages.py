"""Where a restarted head's time goes, read from its log (``cuzk bench cluster``'s breakdown):
each stage is the first line that marks it, in seconds from the process's start."""

from __future__ import annotations

from datetime import datetime

from cuzk.bench.cluster_recovery import restart_stages

LOG = """\
2026-12-05 08:40:01,500 INFO cuzk.serve: authentication: OFF (loopback listen)
2026-12-05 08:40:02,000 INFO cuzk.serve: cluster: connecting to the Ray cluster at 127.0.0.1:1
2026-12-05 08:40:02,250	INFO worker.py:2038 -- Connected to Ray cluster.
2026-12-05 08:40:12,000 INFO cuzk.cluster: found GPU worker g from an earlier head with keys w
2026-12-05 08:40:12,100 INFO cuzk.cluster.executor: cluster node ab joined: 1 GPU worker(s)
2026-12-05 08:40:12,700 INFO cuzk.serve: cluster: 2 node(s); file_sd targets in /tmp/sd.json
2026-12-05 08:40:13,900 INFO cuzk.serve: cluster: keys still resident: w
2026-12-05 08:40:14,000 INFO cuzk.serve: cuzk listening on http://127.0.0.1:4000 (backend cluster)
2026-12-05 08:40:14,500 INFO cuzk.cluster.executor: cluster node ab: CPU worker c answered (1 of 1)
2026-12-05 08:40:14,600 INFO cuzk.cluster.executor: cluster node cd: CPU worker d answered (1 of 1)
2026-12-05 08:40:15,000 INFO cuzk.serve: cuzk listening on http://127.0.0.1:4001 (backend cluster)
"""


def test_each_stage_is_its_first_line_from_the_start():
    t0 = datetime(2026, 12, 5, 8, 40, 1).timestamp()
    assert restart_stages(LOG, t0) == {"connecting": 1.0, "connected": 1.25,
                                       "gpu_worker_found": 11.0, "nodes_joined": 11.7,
                                       "listening": 13.0, "first_cpu_worker": 13.5}


def test_a_stage_not_logged_is_absent():
    t0 = datetime(2026, 12, 5, 8, 40, 1).timestamp()
    fresh = "\n".join(line for line in LOG.splitlines() if "earlier head" not in line)
    assert "gpu_worker_found" not in restart_stages(fresh, t0)
