"""Predictions from the first job (issue 27): a kind never proven here is predicted from the
prover's prior, marked as a prior until measured, and a ``reject`` kind that the prior says
cannot make its deadline is refused rather than admitted and then missed."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from cuzk.engine.settings import ProofKindSettings as K
from cuzk.errors import DeadlineInfeasible
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, wait_until

PHASES = ("synthesizing", "proving", "finalizing")
POREP_PRIOR = {"synthesizing": 0.2, "proving": 5.0, "finalizing": 0.1}
WP_PRIOR = {"synthesizing": 0.05, "proving": 0.3, "finalizing": 0.05}
KINDS = {
    "porep-c2": K("porep-c2", 2, "normal"),
    "winning-post": K("winning-post", 1, "critical", deadline_s=20.0,
                      on_deadline_miss="cancel", deadline_admission="reject"),
}


def _prover() -> ScriptedProver:
    return ScriptedProver({"porep-c2": ScriptedKind(prior=POREP_PRIOR),
                           "winning-post": ScriptedKind(prior=WP_PRIOR)})


def _job_span(exporter, job_id: str):
    return next(s for s in exporter.get_finished_spans()
                if s.name == "cuzk.job" and s.attributes.get("cuzk.job.id") == job_id)


def test_a_fresh_engine_predicts_the_first_job_from_the_prior_marked_until_measured():
    engine, _, exporter = make_test_engine(KINDS, _prover(), gpu_workers_per_device=1)
    engine.start()
    try:
        job = engine.submit("winning-post", [{"tag": "w"}])
        wire = engine.status()
        figures = wire["phase_estimates"]["winning-post"]
        assert {ph: (f["seconds"], f["source"]) for ph, f in figures.items()} == {
            ph: (WP_PRIOR[ph], "prior") for ph in PHASES}
        assert engine.wait(job.id, 10).state == "succeeded"
        span = _job_span(exporter, job.id)
        assert span.attributes["cuzk.job.prediction"] == "prior"
        assert "cuzk.job.predicted_finish" in span.attributes
        after = engine.status()["phase_estimates"]["winning-post"]
        assert {f["source"] for f in after.values()} == {"measured"}
        # A prior is never kept as if it were a measurement: only measured figures persist.
        assert set(engine.estimates.figures()) == {"winning-post"}
        # porep-c2, still unmeasured, keeps a prior, scaled by what winning-post took
        # against its own (cuzk.engine.predict).
        measured = engine.estimates.get("winning-post", "proving")
        seconds, source = engine.estimates.sources()["porep-c2"]["proving"]
        assert source == "prior" and math.isclose(seconds, 5.0 * measured / 0.3)
    finally:
        engine.shutdown(5)


def test_without_a_prior_nothing_is_predicted_and_nothing_is_made_up():
    engine, _, _ = make_test_engine(KINDS, ScriptedProver(), gpu_workers_per_device=1)
    engine.start()
    try:
        engine.pause_workers()
        job = engine.submit("winning-post", [{"tag": "w"}])
        assert engine.status()["phase_estimates"] == {}
        assert engine.predicted_finish(job.id) is None
    finally:
        engine.shutdown(5)


def test_a_configured_or_journaled_figure_wins_over_the_prior(tmp_path: Path):
    kinds = dict(KINDS, **{"porep-c2": K("porep-c2", 2, "normal", phase_seconds=(
        ("synthesizing", 1.0), ("proving", 2.0), ("finalizing", 3.0)))})
    engine, _, _ = make_test_engine(kinds, _prover(), journal_path=tmp_path / "j.sqlite3")
    engine.start()
    try:
        engine.priors.ensure("porep-c2")
        assert engine.estimates.sources()["porep-c2"] == {
            "synthesizing": (1.0, "configured"), "proving": (2.0, "configured"),
            "finalizing": (3.0, "configured")}
    finally:
        engine.shutdown(5)


def test_a_reject_kind_the_prior_says_cannot_finish_is_refused_not_admitted_then_missed():
    """Fresh engine, no history: a winning-post with a 3 s deadline behind porep-c2 work on the
    one GPU worker, whose prior says the GPU is busy for 5 s more, is refused (503)."""
    engine, prover, _ = make_test_engine(KINDS, _prover(), gpu_workers_per_device=1)
    engine.start()
    gates = [prover.hold("gpu", tag) for tag in ("a0", "a1", "b0", "b1")]
    try:
        # Every porep-c2 GPU phase is held (whichever reaches the GPU first): none is measured
        # before the winning-post is submitted (a fast one would replace the 5 s prior).
        porep = [engine.submit("porep-c2", [{"tag": f"{c}0"}, {"tag": f"{c}1"}])
                 for c in "ab"]
        assert wait_until(lambda: any(g.entered.is_set() for g in gates))
        with pytest.raises(DeadlineInfeasible, match="prior"):
            engine.submit("winning-post", [{"tag": "w"}], deadline=time.time() + 3)
        assert engine.counters.get("jobs_rejected")[("winning-post", "deadline")] == 1
        assert [j.proof_kind for j in engine.jobs()] == ["porep-c2", "porep-c2"]
        # What the prior says can finish is admitted, and makes it.
        ok = engine.submit("winning-post", [{"tag": "w2"}], deadline=time.time() + 30)
        for g in gates:
            g.release()
        assert engine.wait(ok.id, 20).state == "succeeded"
        for j in porep:
            assert engine.wait(j.id, 20).state == "succeeded"
        assert engine.counters.get("deadlines_missed")["winning-post"] == 0
    finally:
        for g in gates:
            g.release()
        engine.shutdown(5)


def test_a_prior_the_prover_cannot_give_leaves_the_kind_unpredicted_not_broken():
    class Broken(ScriptedProver):
        def phase_prior(self, proof_kind: str):
            raise OSError("no such r1cs")

    engine, _, _ = make_test_engine(KINDS, Broken(), gpu_workers_per_device=1)
    engine.start()
    try:
        job = engine.submit("winning-post", [{"tag": "w"}])
        assert engine.wait(job.id, 10).state == "succeeded"
        assert wait_until(lambda: engine.estimates.known("winning-post"))
    finally:
        engine.shutdown(5)


def test_a_prior_the_prover_cannot_tell_yet_is_asked_for_again_at_the_next_submit():
    """None is "not now" (a cluster head before a GPU worker answers), never kept for good."""

    class Later(ScriptedProver):
        answers = False

        def phase_prior(self, proof_kind: str):
            return super().phase_prior(proof_kind) if self.answers else None

    prover = Later({"porep-c2": ScriptedKind(prior=POREP_PRIOR),
                    "winning-post": ScriptedKind(prior=WP_PRIOR)})
    engine, _, _ = make_test_engine(KINDS, prover, gpu_workers_per_device=1)
    engine.start()
    try:
        engine.pause_workers()
        engine.submit("winning-post", [{"tag": "w1"}])
        assert "winning-post" not in engine.status()["phase_estimates"]
        prover.answers = True
        engine.submit("winning-post", [{"tag": "w2"}])
        figures = engine.status()["phase_estimates"]["winning-post"]
        assert {f["source"] for f in figures.values()} == {"prior"}
    finally:
        engine.shutdown(5)
