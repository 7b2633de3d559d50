"""``executor_of``: the head's cluster duties get the cluster executor typed, not ``Any``; an
engine over another prover is refused with the reason (no Ray cluster needed)."""

from __future__ import annotations

import pytest

from cuzk.cluster.runtime import executor_of
from tests._doubles import make_test_engine


def test_an_engine_over_another_prover_is_not_a_cluster_engine() -> None:
    engine, _, _ = make_test_engine({"winning-post": (1, "critical")})
    with pytest.raises(TypeError, match="not a cluster engine: it proves with ScriptedProver"):
        executor_of(engine)
