"""Deadline metrics: least slack is read at scrape and absent without deadlines; misses count."""

from __future__ import annotations

import time

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cuzk.engine.settings import ProofKindSettings as K
from tests._doubles import make_test_engine, metrics_of, wait_until

FIGS = (("synthesizing", 0.0), ("proving", 2.0), ("finalizing", 0.0))
KINDS = {"wp": K("wp", 1, "high", on_deadline_miss="cancel", phase_seconds=FIGS),
         "late": K("late", 1, "normal", on_deadline_miss="continue"),
         "bg": (1, "normal")}


def samples(engine, name):
    text = metrics_of(engine).render(openmetrics_format=True)[0].decode()
    return {tuple(sorted(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples if s.name == name}


def test_min_slack_is_absent_when_idle_and_read_from_the_queue():
    engine, prover, _ = make_test_engine(KINDS, gpu_workers_per_device=1)
    with engine:
        assert samples(engine, "cuzk_queue_min_slack_seconds") == {}
        gate = prover.hold("gpu", "b")
        busy = engine.submit("bg", [{"tag": "b"}])
        assert gate.wait_entered()
        assert samples(engine, "cuzk_queue_min_slack_seconds") == {}  # no deadline queued
        job = engine.submit("wp", [{"tag": "w"}], deadline=time.time() + 0.5)
        slack = samples(engine, "cuzk_queue_min_slack_seconds")
        assert list(slack) == [(("priority", "high"),)]
        assert slack[(("priority", "high"),)] < 0  # 2 s of GPU predicted, 0.5 s left
        assert samples(engine, "cuzk_backlog_gpu_seconds")[(("priority", "high"),)] == 2.0
        assert wait_until(lambda: job.terminal, 10)
        gate.release()
        engine.wait(busy.id, 10)
        assert wait_until(engine.quiescent)
        assert samples(engine, "cuzk_queue_min_slack_seconds") == {}
        assert samples(engine, "cuzk_job_deadline_missed_total")[(("proof_kind", "wp"),)] == 1
        margins = samples(engine, "cuzk_job_deadline_margin_seconds_count")
        assert margins.get((("proof_kind", "wp"),), 0) == 0  # a miss is never observed


def test_the_margin_histogram_observes_only_deadlines_met():
    engine, prover, _ = make_test_engine(KINDS, gpu_workers_per_device=1)
    with engine:
        ok = engine.submit("late", [{"tag": "ok"}], deadline=time.time() + 60)
        assert engine.wait(ok.id, 10).state == "succeeded"
        gate = prover.hold("gpu", "slow")
        slow = engine.submit("late", [{"tag": "slow"}], deadline=time.time() + 0.2)
        assert gate.wait_entered()
        assert wait_until(lambda: slow.deadline_missed, 10)
        gate.release()
        assert engine.wait(slow.id, 10).state == "succeeded"  # late, but it finished
        count = samples(engine, "cuzk_job_deadline_margin_seconds_count")
        total = samples(engine, "cuzk_job_deadline_margin_seconds_sum")
        assert count[(("proof_kind", "late"),)] == 1
        assert 0 < total[(("proof_kind", "late"),)] <= 60
        assert samples(engine, "cuzk_job_deadline_missed_total")[(("proof_kind", "late"),)] == 1
