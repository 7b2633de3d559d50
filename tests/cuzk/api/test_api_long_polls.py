"""Long-polls have bounds of their own, per client and in all, and never take the slots submits
and probes need (issue 19: 256 held long-polls made every other request 503 for up to 300 s
while /readyz said 200). Through the real server protocol on a real port."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest
from starlette.applications import Starlette

from cuzk.api.app import create_app
from cuzk.api.server import uvicorn_config
from cuzk.config import Config, ServerConfig
from cuzk.engine.engine import Engine
from cuzk.serve_process import uvicorn_in_thread
from cuzk.simulated_prover import ScriptedProver
from tests.cuzk.api.test_api_limits import metric_value, wait_for

SUBMIT = {"proof_kind": "winning-post", "inputs": [{"tag": "1"}]}


@pytest.fixture
def served(engine: Engine) -> Iterator[tuple[str, Starlette]]:
    config = Config(
        server=ServerConfig(listen="127.0.0.1:0", max_requests_in_flight=2, max_long_polls=3,
                            max_long_polls_per_client=2)
    )
    app = create_app(engine, config)
    with uvicorn_in_thread(uvicorn_config(app, config, log_level="warning")) as url:
        yield url, app


def test_long_polls_past_their_bounds_get_429_and_never_block_submits(
    served: tuple[str, Starlette], prover: ScriptedProver
) -> None:
    url, app = served
    admission = app.state.admission
    gate = prover.hold("gpu", "1")
    a = httpx.Client(base_url=url, timeout=30)
    # A second client: another loopback source address.
    b = httpx.Client(base_url=url, timeout=30,
                     transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    with a, b, ThreadPoolExecutor(4) as pool:
        job = a.post("/v1/proofs", json=SUBMIT).json()
        assert gate.wait_entered()

        def poll(client: httpx.Client) -> Future[httpx.Response]:
            return pool.submit(client.get, f"/v1/proofs/{job['id']}", params={"wait": 30})

        polls = [poll(a), poll(a)]
        # Inside the app, however counted.
        wait_for(lambda: admission.long_polls + admission.in_flight == 2, "two polls waiting")
        # More long-polls than max_requests_in_flight wait, and still every other request is
        # taken: submits, status, probes.
        r = a.post("/v1/proofs", json=SUBMIT)
        assert r.status_code == 202, r.text
        assert a.get("/v1/status").status_code == 200
        assert a.get("/readyz").status_code == 200
        assert a.get("/healthz").status_code == 200

        third = a.get(f"/v1/proofs/{job['id']}", params={"wait": 30})  # per client: 2
        assert third.status_code == 429, third.text
        assert third.headers["retry-after"] == "1"
        assert "server.max_long_polls_per_client" in third.json()["error"]
        assert a.get(f"/v1/proofs/{job['id']}").status_code == 200  # a plain poll is taken

        polls.append(poll(b))  # another client still may, up to the total of 3
        wait_for(lambda: admission.long_polls == 3, "three long-polls waiting")
        fourth = b.get(f"/v1/proofs/{job['id']}", params={"wait": 30})
        assert fourth.status_code == 429, fourth.text
        assert "server.max_long_polls)" in fourth.json()["error"]

        gate.release()
        assert all(p.result().json()["state"] == "succeeded" for p in polls)
        wait_for(lambda: admission.long_polls == 0, "the long-polls' slots freed")
        assert admission.long_polls_by_client == {}
        metrics = a.get("/metrics").text
        assert metric_value(metrics, "cuzk_http_requests_refused_total",
                            "too_many_long_polls") == 2
