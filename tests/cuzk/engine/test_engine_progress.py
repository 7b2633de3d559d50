"""Steps a prover reports (``cuzk.progress``) through the engine: kept on the partition's open
phase scope, so they show while that phase runs and never outlive it."""

from __future__ import annotations

from typing import Any

from cuzk import progress
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine


def test_the_step_a_prover_reports_shows_in_its_phase_and_ends_with_it() -> None:
    """``cuzk.progress`` steps land on the partition's open phase scope: /v1/status shows the
    step while that phase runs, and nothing once the phase has closed."""
    class Reporting(ScriptedProver):
        def gpu_phase(self, key: Any, synthesis: Any, device: str) -> dict[str, Any]:
            progress.step("MSM B1 done, 2/5")
            return super().gpu_phase(key, synthesis, device)

    engine, prover, _ = make_test_engine({"porep-c2": (1, "normal")}, Reporting())
    gate = prover.hold("gpu")
    with engine:
        job = engine.submit("porep-c2", [{"tag": "p"}])
        assert gate.wait_entered()
        (part,) = engine.get(job.id).view().partitions
        assert (part.phase, part.step) == ("proving", "MSM B1 done, 2/5")
        assert part.to_wire()["step"] == "MSM B1 done, 2/5"
        gate.release()
        done = engine.wait(job.id, 10)
    assert done.state == "succeeded"
    assert done.view().partitions[0].step is None
