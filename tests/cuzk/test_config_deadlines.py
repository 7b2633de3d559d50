"""Per-kind deadline settings: bundled defaults, TOML, environment, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuzk.config import ConfigError, load_config


def test_bundled_defaults_reach_the_engine():
    kinds = load_config(env={}, check_files=False).engine_settings().proof_kinds
    assert kinds["winning-post"].deadline_s == 20.0
    assert (kinds["winning-post"].on_deadline_miss, kinds["winning-post"].deadline_admission) \
        == ("cancel", "reject")
    assert kinds["window-post"].deadline_s == 1800.0
    assert kinds["window-post"].deadline_admission == "accept"
    assert kinds["porep-c2"].deadline_s is None and kinds["snap-update"].deadline_s is None


def test_toml_and_environment(tmp_path: Path):
    p = tmp_path / "cuzk.toml"
    p.write_text('[proof_kinds.porep-c2]\ndeadline = "25m"\non_deadline_miss = "cancel"\n'
                 "phase_seconds = {synthesizing = 0.8, proving = 2.5, finalizing = 0.4}\n")
    env = {"CUZK_PROOF_KINDS_WINNING_POST_DEADLINE": "15s",
           "CUZK_PROOF_KINDS_SNAP_UPDATE_PHASE_SECONDS": "proving=3,finalizing=0.5"}
    kinds = load_config(p, env=env, check_files=False).engine_settings().proof_kinds
    c2 = kinds["porep-c2"]
    assert c2.deadline_s == 1500.0 and c2.on_deadline_miss == "cancel"
    assert dict(c2.phase_seconds) == {"synthesizing": 0.8, "proving": 2.5, "finalizing": 0.4}
    assert kinds["winning-post"].deadline_s == 15.0
    assert dict(kinds["snap-update"].phase_seconds) == {"proving": 3.0, "finalizing": 0.5}


@pytest.mark.parametrize(("line", "key"), [
    ('deadline = "soon"', "proof_kinds.porep-c2.deadline"),
    ("deadline = -5", "proof_kinds.porep-c2.deadline"),
    ('on_deadline_miss = "retry"', "proof_kinds.porep-c2.on_deadline_miss"),
    ('deadline_admission = "maybe"', "proof_kinds.porep-c2.deadline_admission"),
    ("phase_seconds = {gpu = 1}", "proof_kinds.porep-c2.phase_seconds"),
    ("phase_seconds = {proving = -1}", "proof_kinds.porep-c2.phase_seconds"),
])
def test_bad_values_name_their_key(tmp_path: Path, line: str, key: str):
    p = tmp_path / "cuzk.toml"
    p.write_text(f"[proof_kinds.porep-c2]\n{line}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p, env={}, check_files=False)
    assert key in str(e.value)


def test_the_deadline_horizon_is_a_setting_and_bounds_each_kinds_deadline(tmp_path: Path):
    assert load_config(env={}, check_files=False).engine.deadline_horizon == 7 * 86400.0
    env = {"CUZK_ENGINE_DEADLINE_HORIZON": "36h"}
    assert load_config(env=env, check_files=False).engine_settings().deadline_horizon \
        == 36 * 3600.0
    p = tmp_path / "cuzk.toml"
    p.write_text('[engine]\ndeadline_horizon = "1h"\n[proof_kinds.porep-c2]\ndeadline = "2h"\n')
    with pytest.raises(ConfigError) as e:
        load_config(p, env={}, check_files=False)
    assert "proof_kinds.porep-c2.deadline" in str(e.value)
    assert "engine.deadline_horizon" in str(e.value)
