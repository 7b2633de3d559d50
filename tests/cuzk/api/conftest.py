"""A real engine (scripted prover, tiny memory budget) behind the real ASGI app."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():  # it nags that httpx should be httpx2; irrelevant here
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

from cuzk.api.app import create_app
from cuzk.config import Config
from cuzk.engine.engine import Engine


@pytest.fixture
def config() -> Config:
    return Config()


@pytest.fixture
def app(engine: Engine, config: Config):  # type: ignore[no-untyped-def]
    return create_app(engine, config)


@pytest.fixture
def client(app) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with TestClient(app) as c:
        yield c
