"""The token on both ends: `cuzk serve` refuses an exposed listen without one, and the client
commands send it from $CUZK_AUTH_TOKEN, --token-file or $CUZK_AUTH_TOKEN_FILE."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cuzk.cli._http import CliError
from cuzk.cli.main import main
from cuzk.cli.serve import _auth_banner, check_exposure, is_loopback
from cuzk.config import Config, ConfigError, ServerConfig
from cuzk.serve_process import ServeProcess, serve_env
from tests.conftest import KEYS_DIR
from tests.cuzk.cli.conftest import AUTH_TOKEN

TOKEN = AUTH_TOKEN


@pytest.fixture(autouse=True)
def no_token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUZK_AUTH_TOKEN", "CUZK_AUTH_TOKEN_FILE", "CUZK_URL"):
        monkeypatch.delenv(var, raising=False)


def submit(url: str, tmp_path: Path, *extra: str) -> int:
    inputs = tmp_path / "in.json"
    inputs.write_text(json.dumps({"tag": "5"}))
    return main(
        ["submit", "winning-post", "--server", url, "--input", str(inputs),
         "--out", str(tmp_path / "out"), *extra]
    )  # fmt: skip


def test_token_from_the_environment(
    authed_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUZK_AUTH_TOKEN", TOKEN)
    assert submit(authed_url, tmp_path) == 0
    assert json.loads((tmp_path / "out" / "public_0.json").read_text()) == ["5"]


def test_token_from_a_file_option_or_variable(
    authed_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    assert submit(authed_url, tmp_path, "--token-file", str(f)) == 0
    monkeypatch.setenv("CUZK_AUTH_TOKEN_FILE", str(f))
    assert main(["status", "--server", authed_url, "--once"]) == 0


def test_missing_token_says_how_to_give_one(
    authed_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert submit(authed_url, tmp_path) != 0
    err = capsys.readouterr().err
    assert "401" in err and "CUZK_AUTH_TOKEN" in err


def test_wrong_token_is_refused(
    authed_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("CUZK_AUTH_TOKEN", "not-the-token-at-all-0000")
    assert submit(authed_url, tmp_path) != 0
    assert "token sent was refused" in capsys.readouterr().err


def test_unreadable_token_file_is_a_clear_error(tmp_path: Path) -> None:
    from cuzk.cli._http import auth_token

    with pytest.raises(CliError, match="cannot read the token file"):
        auth_token(str(tmp_path / "missing"))


# --------------------------------------------------------------------------- serve exposure


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.5.6.7", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("example.org", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_serve_refuses_an_exposed_listen_without_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before anything binds or starts."""
    for var in ("CUZK_SERVER_AUTH_TOKEN", "CUZK_SERVER_AUTH_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    assert main(["serve", "--listen", "0.0.0.0:0"]) == 2
    err = capsys.readouterr().err
    assert "server.allow_unauthenticated" in err and "server.auth_token" in err


def test_exposed_listen_is_allowed_with_a_token_or_explicitly() -> None:
    with_token = Config(server=ServerConfig(listen="0.0.0.0:9820", auth_token=TOKEN))
    assert check_exposure(with_token) == TOKEN
    assert "bearer token required" in _auth_banner(with_token, TOKEN)
    allowed = Config(server=ServerConfig(listen="0.0.0.0:9820", allow_unauthenticated=True))
    assert check_exposure(allowed) is None
    assert "OFF on a non-loopback address" in _auth_banner(allowed, None)
    with pytest.raises(ConfigError, match="reachable from other machines"):
        check_exposure(Config(server=ServerConfig(listen="[::]:9820")))
    local = Config(server=ServerConfig(listen="127.0.0.1:9820"))
    assert check_exposure(local) is None
    assert "OFF (loopback" in _auth_banner(local, None)


def test_print_config_redacts_the_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUZK_SERVER_AUTH_TOKEN", TOKEN)
    assert main(["serve", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out and json.loads(out)["server"]["auth_token"] == "<redacted>"


@pytest.mark.slow
def test_real_serve_with_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The console-script path: the start banner says a token is required, routes need it,
    probes do not, and `cuzk status` sends it from the environment."""
    served = ServeProcess(
        serve_env(tmp_path / "journal.sqlite3", KEYS_DIR, CUZK_SERVER_AUTH_TOKEN=TOKEN)
    )
    try:
        served.start(timeout=60)
        banner = served.output
        assert "authentication: bearer token required on every route but /healthz" in banner
        assert httpx.get(f"{served.url}/healthz").status_code == 200
        refused = httpx.get(f"{served.url}/v1/status")
        assert refused.status_code == 401 and "www-authenticate" in refused.headers
        ok = httpx.get(f"{served.url}/v1/status", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
        monkeypatch.setenv("CUZK_AUTH_TOKEN", TOKEN)
        assert main(["status", "--server", served.url, "--once"]) == 0
    finally:
        served.stop()


def test_the_compose_stack_is_allowed_to_start() -> None:
    """docker-compose.yml listens on 0.0.0.0 (published on loopback only): it must say
    allow_unauthenticated explicitly, or `cuzk serve` would refuse to start in it."""
    import yaml

    from cuzk.config import load_config

    root = Path(__file__).resolve().parents[3]
    env = yaml.safe_load((root / "docker-compose.yml").read_text())["services"]["cuzk"][
        "environment"
    ]
    cuzk_env = {k: str(v) for k, v in env.items() if k.startswith("CUZK_")}
    config = load_config(None, env=cuzk_env, check_files=False)
    assert not is_loopback(config.server.host)
    assert check_exposure(config) is None  # allowed, explicitly
