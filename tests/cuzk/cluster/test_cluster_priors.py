"""A cluster head's priors (``cuzk.cluster.priors``) with stub GPU workers, no Ray: one ask per
kind, kept; a busy worker holds admission up for at most the timeout, in all; a lost one is
asked again later; each kind's trouble is logged once."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future

from cuzk.cluster.priors import PriorSource, RemotePriors
from cuzk.engine.backend import PhasePrior

PRIOR = PhasePrior({"synthesizing": 0.1, "proving": 0.5, "finalizing": 0.02}, "domain 2^10")


class StubWorker:
    """A GPU worker that answers at once (``reply``: a prior, None, or an exception it fails
    with) or, with ``hold``, not until the test sets the answer of ``asked[i][1]``."""

    def __init__(self, worker_id: str = "gpu-0", node_id: str = "ab" * 20,
                 reply: PhasePrior | Exception | None = PRIOR, hold: bool = False) -> None:
        self.worker_id, self.node_id = worker_id, node_id
        self.reply, self.hold = reply, hold
        self.asked: list[tuple[str, Future]] = []

    def ask(self, kind: str) -> Future:
        f: Future = Future()
        self.asked.append((kind, f))
        if not self.hold:
            if isinstance(self.reply, Exception):
                f.set_exception(self.reply)
            else:
                f.set_result(self.reply)
        return f

    def source(self) -> PriorSource:
        return PriorSource(self.worker_id, self.node_id, self.ask)


def _resolve(f: Future, timeout: float) -> PhasePrior | None:
    return f.result(timeout)


def _priors(workers: list[StubWorker | None], timeout_s: float = 0.3,
            retry_s: float = 10.0) -> RemotePriors:
    """Priors that pick ``workers[0]`` (None: no worker answers yet)."""
    return RemotePriors(lambda: workers[0].source() if workers[0] else None, _resolve,
                        timeout_s=timeout_s, retry_s=retry_s)


def test_a_kind_is_asked_once_and_its_basis_names_the_worker_and_node():
    w = StubWorker()
    priors = _priors([w])
    first = priors.get("porep-c2")
    assert first is not None and dict(first.seconds) == dict(PRIOR.seconds)
    assert first.basis == f"domain 2^10; from GPU worker gpu-0 on node {'ab' * 6}"
    assert priors.get("porep-c2") == first
    assert priors.calls == 1 and [k for k, _ in w.asked] == ["porep-c2"]
    priors.get("winning-post")
    assert priors.calls == 2


def test_a_busy_worker_holds_admission_up_for_the_timeout_once_then_not_at_all(caplog):
    w = StubWorker(hold=True)
    priors = _priors([w], timeout_s=0.3)
    with caplog.at_level(logging.WARNING, logger="cuzk.cluster.priors"):
        t0 = time.monotonic()
        assert priors.get("porep-c2") is None
        waited = time.monotonic() - t0
        assert 0.25 <= waited < 2.0, waited
        t0 = time.monotonic()
        assert priors.get("porep-c2") is None  # the same ask, its time spent: no wait
        assert time.monotonic() - t0 < 0.2
    assert priors.calls == 1 and len(w.asked) == 1
    assert len([r for r in caplog.records if "porep-c2" in r.getMessage()]) == 1
    # The answer that comes late is taken by the next caller, without a second call.
    w.asked[0][1].set_result(PRIOR)
    late = priors.get("porep-c2")
    assert late is not None and late.seconds["proving"] == 0.5
    assert priors.calls == 1


def test_a_lost_worker_is_not_asked_again_before_the_retry_time_then_a_live_one_is():
    lost = StubWorker("gpu-lost", reply=ConnectionError("actor died"))
    live = StubWorker("gpu-live")
    workers: list[StubWorker | None] = [lost]
    priors = _priors(workers, retry_s=0.2)
    assert priors.get("porep-c2") is None
    assert priors.get("porep-c2") is None  # within the retry time: no call
    assert priors.calls == 1
    workers[0] = live
    time.sleep(0.25)  # past the retry time (the bound under test, not a hope)
    got = priors.get("porep-c2")
    assert got is not None and "gpu-live" in got.basis
    assert priors.calls == 2


def test_without_a_gpu_worker_there_is_no_prior_yet_logged_once(caplog):
    workers: list[StubWorker | None] = [None]
    priors = _priors(workers)
    with caplog.at_level(logging.INFO, logger="cuzk.cluster.priors"):
        assert priors.get("porep-c2") is None
        assert priors.get("porep-c2") is None
    assert len(caplog.records) == 1
    assert "no GPU worker answers yet" in caplog.records[0].getMessage()
    assert priors.calls == 0
    workers[0] = StubWorker(reply=None)
    assert priors.get("porep-c2") is None  # the worker cannot tell (CUDA): kept
    assert priors.get("porep-c2") is None
    assert priors.calls == 1
