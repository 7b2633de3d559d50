"""Deadlines through the real engine: order, miss policies, admission, restart, journal."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from cuzk.engine.journal import SCHEMA_VERSION, Journal
from cuzk.engine.settings import ProofKindSettings as K
from cuzk.errors import DeadlineInfeasible, InputError
from tests._doubles import make_test_engine, wait_until
from tests.cuzk.engine._scenarios import give_way_engine, run_give_way

KINDS = {
    "bg": (1, "normal"),
    "wp": K("wp", 2, "normal", on_deadline_miss="cancel"),
    "late-ok": K("late-ok", 1, "normal", on_deadline_miss="continue"),
    "urgent": K("urgent", 1, "critical", deadline_admission="reject",
                phase_seconds=(("synthesizing", 0.0), ("proving", 5.0), ("finalizing", 0.0))),
    "soft": K("soft", 1, "critical", deadline_admission="accept",
              phase_seconds=(("synthesizing", 0.0), ("proving", 5.0), ("finalizing", 0.0))),
}


@pytest.fixture
def engine_parts():
    engine, prover, exporter = make_test_engine(KINDS, gpu_workers_per_device=1)
    engine.start()
    yield engine, prover, exporter
    engine.shutdown(5)


def test_within_a_class_earliest_deadline_first_and_no_deadline_last(engine_parts):
    engine, _, _ = engine_parts
    engine.pause_workers()
    now = time.time()
    jobs = [
        engine.submit("bg", [{"tag": "none1"}]),
        engine.submit("late-ok", [{"tag": "d30"}], deadline=now + 30),
        engine.submit("bg", [{"tag": "low-d1"}], priority="low", deadline=now + 1),
        engine.submit("late-ok", [{"tag": "d10"}], deadline=now + 10),
        engine.submit("bg", [{"tag": "none2"}]),
        engine.submit("bg", [{"tag": "high"}], priority="high"),
    ]
    assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 6)
    order = [p.inputs["tag"] for p in engine.pipeline.gpu_queue.items()]
    assert order == ["high", "d10", "d30", "none1", "none2", "low-d1"]
    engine.resume_workers()
    for j in jobs:
        engine.wait(j.id, 10)
    assert all(j.state == "succeeded" for j in jobs[:2] + jobs[3:])


def test_a_missed_job_is_cut_releases_its_memory_and_does_not_block_the_next(engine_parts):
    engine, prover, _ = engine_parts
    gate = prover.hold("gpu", "blocker")  # the one worker is busy
    blocker = engine.submit("bg", [{"tag": "blocker"}])
    assert gate.wait_entered()
    first = engine.submit("wp", [{"tag": "a0"}, {"tag": "a1"}], deadline=time.time() + 0.3)
    assert wait_until(lambda: first.terminal, 10)
    assert first.state == "deadline_exceeded"
    assert "on_deadline_miss = cancel" in (first.error or "")
    assert first.to_dict()["deadline"]["missed"] is True
    # Its partitions were synthesized and waiting for the GPU: their memory is back (only
    # the blocker's partition holds working memory now).
    assert wait_until(lambda: [r.consumer for r in engine.host_budget.live()
                               if r.consumer != "proving_key"] == ["partition"], 5)
    second = engine.submit("wp", [{"tag": "b0"}, {"tag": "b1"}], deadline=time.time() + 30)
    gate.release()
    assert engine.wait(second.id, 10).state == "succeeded"
    assert engine.wait(blocker.id, 10).state == "succeeded"
    assert not any(tag in ("a0", "a1") for step, ev, tag in prover.events if step == "gpu")
    assert engine.counters.get("deadlines_missed")["wp"] == 1
    assert engine.counters.get("jobs_completed")[("wp", "deadline_exceeded")] == 1


def test_continue_policy_finishes_late_and_counts_the_miss(engine_parts):
    engine, prover, _ = engine_parts
    gate = prover.hold("gpu", "x")
    job = engine.submit("late-ok", [{"tag": "x"}], deadline=time.time() + 0.2)
    assert gate.wait_entered()
    assert wait_until(lambda: job.deadline_missed, 10)
    gate.release()
    assert engine.wait(job.id, 10).state == "succeeded"
    info = job.to_dict()
    assert info["deadline"]["missed"] is True and info["proofs"]
    assert engine.counters.get("deadlines_missed")["late-ok"] == 1


def test_admission_rejects_an_infeasible_deadline_and_changes_nothing_else(engine_parts):
    engine, _, _ = engine_parts
    with pytest.raises(DeadlineInfeasible) as e:
        engine.submit("urgent", [{"tag": "u"}], deadline=time.time() + 1.0)
    assert e.value.slack_s == pytest.approx(-4.0, abs=0.5)
    assert "predicted to finish" in str(e.value)
    assert engine.jobs() == []
    assert engine.counters.get("jobs_rejected")[("urgent", "deadline")] == 1
    assert engine.counters.get("jobs_submitted")["urgent"] == 0
    ok = engine.submit("urgent", [{"tag": "u"}], deadline=time.time() + 60)
    assert engine.wait(ok.id, 10).state == "succeeded"


def test_admission_accepts_at_risk_under_accept(engine_parts):
    engine, prover, _ = engine_parts
    gate = prover.hold("gpu", "s")
    job = engine.submit("soft", [{"tag": "s"}], deadline=time.time() + 1.0)
    assert gate.wait_entered()
    view = next(j for j in engine.status()["jobs"] if j["id"] == job.id)
    assert view["deadline"]["at_risk"] is True
    assert view["deadline"]["slack_s"] is not None and view["deadline"]["slack_s"] < 0
    gate.release()
    engine.wait(job.id, 10)


def test_a_deadline_in_the_past_is_bad_input(engine_parts):
    engine, _, _ = engine_parts
    with pytest.raises(InputError, match="already passed"):
        engine.submit("bg", [{"tag": "p"}], deadline=time.time() - 1)
    assert engine.jobs() == []


def test_a_kind_default_deadline_applies():
    kinds = {"dflt": K("dflt", 1, "normal", deadline_s=600.0)}
    eng, _, _ = make_test_engine(kinds)
    eng.start()
    try:
        before = time.time()
        job = eng.submit("dflt", [{"tag": "d"}])
        assert job.deadline is not None and before + 600 <= job.deadline <= time.time() + 600
        assert eng.wait(job.id, 10).to_dict()["deadline"]["missed"] is False
    finally:
        eng.shutdown(5)


def test_restart_keeps_deadlines_and_estimates(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    engine, _, _ = make_test_engine(KINDS, journal_path=path)
    engine.start()
    warm = engine.submit("bg", [{"tag": "w"}])
    assert engine.wait(warm.id, 10).state == "succeeded"
    engine.pause_workers()
    at = time.time() + 300
    job = engine.submit("late-ok", [{"tag": "r"}], deadline=at)
    assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 1)
    engine.shutdown(5)
    again, _, _ = make_test_engine(KINDS, journal_path=path)
    assert again.estimates.known("bg")  # the last run's figures, from the journal
    again.start()
    try:
        back = again.get(job.id)
        assert back.deadline == at
        assert again.wait(job.id, 10).state == "succeeded"
        assert again.get(job.id).to_dict()["deadline"]["at"] == at
    finally:
        again.shutdown(5)


def test_a_version_1_journal_is_migrated_and_stays_readable(tmp_path: Path):
    path = tmp_path / "old.sqlite3"
    j = Journal.open(path)
    j.close()
    db = sqlite3.connect(path)  # make it what cuzk wrote before deadlines
    db.executescript(
        "ALTER TABLE jobs DROP COLUMN deadline;"
        "UPDATE meta SET value = '1' WHERE key = 'schema_version';"
        "INSERT INTO jobs (id, request_id, proof_kind, priority, inputs, inputs_digest,"
        " attempt, seq, submitted_at, state) VALUES"
        " ('old', NULL, 'bg', 'normal', '[{\"tag\": \"o\"}]', 'x', 1, 0, 1.0, 'accepted');")
    db.commit()
    db.close()
    j = Journal.open(path)
    try:
        [rec] = j.unfinished()
        assert rec.id == "old" and rec.deadline is None
    finally:
        j.close()
    db = sqlite3.connect(path)
    version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert version == str(SCHEMA_VERSION)
    db.close()


def test_deadline_less_work_is_not_starved_by_feasible_deadlines(engine_parts):
    """It goes after the deadlines of its class, but it goes: the feasible ones finish."""
    engine, prover, _ = engine_parts
    engine.pause_workers()
    plain = engine.submit("bg", [{"tag": "plain"}])
    dl = [engine.submit("late-ok", [{"tag": f"d{i}"}], deadline=time.time() + 60)
          for i in range(5)]
    assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 6)
    engine.resume_workers()
    assert engine.wait(plain.id, 10).state == "succeeded"
    gpu = [tag for step, ev, tag in prover.events if step == "gpu" and ev == "start"]
    assert gpu == [f"d{i}" for i in range(5)] + ["plain"]
    for j in dl:
        assert engine.wait(j.id, 10).state == "succeeded"
        assert not j.deadline_missed


def test_a_critical_partition_preempts_lower_class_synthesis_for_memory():
    """Memory full of synthesized low partitions waiting for a GPU: a critical one takes the
    memory of one of them (sent back to synthesis, counted) instead of waiting."""
    engine, prover, _ = make_test_engine(
        {"low": (2, "low"), "crit": (1, "critical")}, memory_budget_bytes=2 * 1000 + 2 * 100,
        synthesis_threads=2)
    with engine:
        engine.preload("low")
        engine.preload("crit")
        engine.pause_workers()
        low = engine.submit("low", [{"tag": "l0"}, {"tag": "l1"}])
        assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 2)
        crit = engine.submit("crit", [{"tag": "c"}])
        assert wait_until(lambda: any(p.inputs["tag"] == "c"
                                      for p in engine.pipeline.gpu_queue.items()), 10)
        assert engine.counters.get("synthesis_preempted")["low"] >= 1
        engine.resume_workers()
        assert engine.wait(crit.id, 10).state == "succeeded"
        assert engine.wait(low.id, 10).state == "succeeded"
        gpu = [tag for step, ev, tag in prover.events if step == "gpu" and ev == "start"]
        assert gpu[0] == "c"
        assert prover.calls["synthesize"] == 4  # one low partition synthesized twice


def test_a_memory_wait_gives_its_thread_to_an_earlier_deadline_of_the_same_class():
    """One synthesis thread waits for memory for a far deadline; a nearer deadline of the same
    class arrives: the thread gives way (it held nothing), so the near one is granted first."""
    engine, prover, _ = give_way_engine()
    with engine:
        run_give_way(engine)
        synth = [tag for step, ev, tag in prover.events if step == "synthesize" and ev == "start"]
        assert synth == ["h", "n", "f"]


def test_without_preemption_the_critical_partition_waits_for_memory():
    engine, _, _ = make_test_engine(
        {"low": (2, "low"), "crit": (1, "critical")}, memory_budget_bytes=2 * 1000 + 2 * 100,
        synthesis_threads=2, preempt_synthesis=False)
    with engine:
        engine.preload("low")
        engine.preload("crit")
        engine.pause_workers()
        low = engine.submit("low", [{"tag": "l0"}, {"tag": "l1"}])
        assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 2)
        crit = engine.submit("crit", [{"tag": "c"}])
        assert wait_until(lambda: engine.host_budget.waiters == 1)
        assert not wait_until(lambda: len(engine.pipeline.gpu_queue) == 3, 0.5)
        engine.resume_workers()
        assert engine.wait(crit.id, 10).state == "succeeded"
        assert engine.wait(low.id, 10).state == "succeeded"
