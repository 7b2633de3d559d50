"""Key loading is its own phase, span and time (issue 21): not memory waiting.

Before, a partition's whole admission (grant *and* key load) was the ``waiting_memory`` scope:
on a fresh server its phase time summed to seconds while the memory-wait histogram held
milliseconds, the live view showed ``synthesizing`` (no memory waiter), and a broken key was an
error on the ``cuzk.memory.wait`` span.
"""

from __future__ import annotations

import time

from opentelemetry.trace import StatusCode
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cuzk.engine.events import PartitionPhaseEnded
from tests._doubles import make_test_engine, metrics_of, wait_until

KINDS = {"pair": (2, "normal")}
HOLD_S = 0.3


def _families(engine):
    text, _ = metrics_of(engine).render(openmetrics_format=True)
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def _phases(fams):
    out: dict[str, float] = {}
    for s in fams["cuzk_partitions"].samples:
        out[s.labels["phase"]] = out.get(s.labels["phase"], 0) + s.value
    return out


def test_partitions_waiting_for_their_key_are_loading_key_in_snapshot_metrics_and_time():
    engine, prover, exporter = make_test_engine(KINDS, synthesis_threads=2)
    ended: list[PartitionPhaseEnded] = []
    engine.subscribe(lambda e: ended.append(e) if isinstance(e, PartitionPhaseEnded) else None)
    gate = prover.hold("load_key", "pair")
    with engine:
        job = engine.submit("pair", [{"tag": "a"}, {"tag": "b"}])
        assert gate.wait_entered()
        # Both partitions are granted: one loads the key, the other waits for that load.
        assert wait_until(lambda: [p.phase for p in engine.snapshot().jobs[0].partitions]
                          == ["loading_key", "loading_key"], 5)
        time.sleep(HOLD_S)  # the load takes this long (the gate holds it)
        snap = engine.snapshot()
        assert snap.partition_phases[("pair", "loading_key")] == 2
        assert snap.partition_phases[("pair", "waiting_memory")] == 0
        assert snap.memory.waiters == ()
        assert snap.keys == ()  # not resident while it loads
        fams = _families(engine)
        phases = _phases(fams)
        assert phases["loading_key"] == 2 and phases["waiting_memory"] == 0
        assert fams["cuzk_memory_waiters"].samples[0].value == 0
        ms = [p.phase_ms for p in snap.jobs[0].partitions]
        assert all(m["loading_key"] >= HOLD_S * 1000 for m in ms), ms
        gate.release()
        assert engine.wait(job.id, 5).state == "succeeded"
    loading = [e.seconds for e in ended if e.phase == "loading_key"]
    waiting = [e.seconds for e in ended if e.phase == "waiting_memory"]
    assert len(loading) == 2 and min(loading) >= HOLD_S, loading
    assert max(waiting) < HOLD_S / 3, waiting  # the grant itself never waited
    wait_sum = next(s.value for s in _families(engine)["cuzk_memory_acquire_wait_seconds"].samples
                    if s.name.endswith("_sum") and s.labels["consumer"] == "partition")
    assert wait_sum < HOLD_S / 3, wait_sum
    spans = exporter.get_finished_spans()
    loads = [s for s in spans if s.name == "cuzk.key.load"]
    assert len(loads) == 2
    assert all(s.attributes["cuzk.proof_kind"] == "pair" for s in loads)
    assert all((s.end_time - s.start_time) / 1e9 >= HOLD_S for s in loads)
    assert all((s.end_time - s.start_time) / 1e9 < HOLD_S / 3
               for s in spans if s.name == "cuzk.memory.wait")


def test_a_broken_key_is_an_error_on_the_key_load_span_not_the_memory_wait():
    engine, prover, exporter = make_test_engine({"solo": (1, "normal")})
    prover.fail("load_key", "solo", OSError("zkey truncated"))
    with engine:
        job = engine.submit("solo", [{"tag": "x"}])
        out = engine.wait(job.id, 5)
    assert out.state == "failed" and "zkey truncated" in (out.error or "")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    load, wait = spans["cuzk.key.load"], spans["cuzk.memory.wait"]
    assert load.status.status_code == StatusCode.ERROR
    assert any(ev.name == "exception" for ev in load.events)
    assert wait.status.status_code != StatusCode.ERROR
    assert load.parent.span_id == wait.parent.span_id == spans["cuzk.partition"].context.span_id


def test_a_resident_key_has_no_loading_phase():
    engine, _, exporter = make_test_engine({"solo": (1, "normal")})
    with engine:
        first = engine.submit("solo", [{"tag": "1"}])
        assert engine.wait(first.id, 5).state == "succeeded"
        exporter.clear()
        second = engine.submit("solo", [{"tag": "2"}])
        assert engine.wait(second.id, 5).state == "succeeded"
    names = [s.name for s in exporter.get_finished_spans()]
    assert "cuzk.key.load" not in names and "cuzk.memory.wait" in names
