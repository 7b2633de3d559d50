"""A real engine (scripted prover) behind the real app, in-process or on a real port."""

from __future__ import annotations

import socket
import warnings
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():  # it nags that httpx should be httpx2; irrelevant here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.config import Config
from cuzk.engine.engine import Engine
from cuzk.serve_process import uvicorn_in_thread


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(engine, Config())) as c:
        yield c


@pytest.fixture
def server_url(engine: Engine) -> Iterator[str]:
    """The app under uvicorn on 127.0.0.1 and a free port, for tests of the whole CLI path."""
    config = uvicorn.Config(
        create_app(engine, Config()), host="127.0.0.1", port=0, lifespan="off",
        log_level="warning",
    )  # fmt: skip
    with uvicorn_in_thread(config) as url:
        yield url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (it was free a moment ago)."""
    return _free_port()


AUTH_TOKEN = "cli-test-token-0123456789abcdef"


@pytest.fixture
def authed_url(engine: Engine) -> Iterator[str]:
    """The shared engine behind a server that requires ``AUTH_TOKEN``."""
    from cuzk.api.server import uvicorn_config
    from cuzk.config import ServerConfig

    config = Config(server=ServerConfig(listen="127.0.0.1:0", auth_token=AUTH_TOKEN))
    with uvicorn_in_thread(
        uvicorn_config(create_app(engine, config), config, log_level="warning")
    ) as url:
        yield url
