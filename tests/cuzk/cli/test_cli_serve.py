"""`cuzk serve`: configuration handling, and a real start on a free port."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest

from cuzk.cli.main import main
from cuzk.serve_process import ServeProcess, clean_env


def test_print_config_applies_file_env_and_listen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "cuzk.toml"
    cfg.write_text('[engine]\nbackend = "cpu"\n[proof_kinds.porep-c2]\npartitions = 2\n')
    monkeypatch.setenv("CUZK_ENGINE_GPU_WORKERS_PER_DEVICE", "3")
    code = main(["serve", "--config", str(cfg), "--listen", "127.0.0.1:8181", "--print-config"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["server"]["listen"] == "127.0.0.1:8181"
    assert shown["engine"]["backend"] == "cpu"
    assert shown["engine"]["gpu_workers_per_device"] == 3
    assert shown["proof_kinds"]["porep-c2"]["partitions"] == 2
    assert set(shown["proof_kinds"]) == {"winning-post", "window-post", "snap-update", "porep-c2"}
    assert shown["source"] == str(cfg.resolve())


def test_config_from_cuzk_config_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[server]\nlisten = "127.0.0.1:7000"\n')
    monkeypatch.setenv("CUZK_CONFIG", str(cfg))
    assert main(["serve", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["server"]["listen"] == "127.0.0.1:7000"


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {"CUZK_ENGINE_GPU_WORKERS_PER_DEVICE": "x"}, "engine.gpu_workers_per_device"),
        ([], {"CUZK_ENGINE_RESERVED_GPU_WORKERS_PER_DEVICE": "-1"},
         "engine.reserved_gpu_workers_per_device (from "
         "CUZK_ENGINE_RESERVED_GPU_WORKERS_PER_DEVICE): must be an integer >= 0"),
        (["--listen", "localhost"], {}, "server.listen (from command line): must be HOST:PORT"),
        (["--config", "/no/such/cuzk.toml"], {}, "config file not found"),
    ],
)
def test_bad_configuration_exits_2_naming_the_key(
    argv: list[str],
    env: dict[str, str],
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["serve", *argv]) == 2
    assert expected in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_starts_on_embedded_defaults_and_stops_cleanly(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """The real console-script path: engine, app and uvicorn; logs where it listens; a signal
    stops it with the engine shut down and exit status 0. On a fresh key cache the key of the
    one bundled kind that rejects deadlines it cannot meet (winning-post, 20 s) is made before
    the server answers, so its first job does not spend its deadline making it; no other is."""
    env = clean_env() | {
        "CUZK_ENGINE_KEYS_DIR": str(tmp_path),
        "CUZK_JOURNAL_PATH": str(tmp_path / "journal.sqlite3"),
    }
    served = ServeProcess(env)
    try:
        url = served.start(timeout=90)
        assert [p.stem.rsplit("-", 1)[0] for p in tmp_path.glob("*.zkey")] == ["winning-post"]
        assert served.backend in ("cpu", "cuda")
        assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
        assert httpx.get(f"{url}/readyz").status_code == 200
        kinds = {c["proof_kind"] for c in httpx.get(f"{url}/v1/circuits").json()["circuits"]}
        assert kinds == {"winning-post", "window-post", "snap-update", "porep-c2"}
        # On the defaults each device has two workers of any class and one reserved for
        # critical and high work, a worker of its own in status.
        ids = [w["id"] for w in httpx.get(f"{url}/v1/status").json()["workers"]]
        kind = "cpu" if served.backend == "cpu" else "gpu"
        assert ids[:3] == [f"{kind}-0", f"{kind}-1", f"{kind}-r0"]
        served.signal(stop)
        assert served.wait(20) == 0
        assert "shutting down the engine" in served.output, served.output
    finally:
        served.kill()
