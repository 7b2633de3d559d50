"""A real engine (scripted prover, tiny memory budget) behind the real ASGI app; the
``client`` checks every response against the OpenAPI document."""

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
from tests.cuzk.api._openapi_check import OpenApiChecker


class CheckedClient(TestClient):
    """A TestClient whose every response must match the OpenAPI document."""

    checker: OpenApiChecker | None = None

    def request(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        response = super().request(*args, **kwargs)
        if self.checker is not None:
            self.checker.check(response)
        return response


@pytest.fixture
def config() -> Config:
    return Config()


@pytest.fixture
def app(engine: Engine, config: Config):  # type: ignore[no-untyped-def]
    return create_app(engine, config)


@pytest.fixture
def client(app) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    with CheckedClient(app) as c:
        document = c.get("/openapi.json").json()  # the document as served, front end included
        c.checker = OpenApiChecker(document, app.routes)
        yield c
