"""`cuzk serve` with OTEL_* values this installation cannot honour: it starts and serves, and
says so in one log line per value, never a traceback (docs/telemetry.md)."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from cuzk.serve_process import ServeProcess, clean_env


@pytest.mark.slow
def test_unsupported_otel_values_are_one_line_each_and_serving_goes_on(tmp_path: Path) -> None:
    env = clean_env() | {
        "CUZK_ENGINE_KEYS_DIR": str(tmp_path),
        "CUZK_JOURNAL_PATH": str(tmp_path / "journal.sqlite3"),
        "OTEL_TRACES_EXPORTER": "zipkin",
        "OTEL_TRACES_SAMPLER": "sometimes",
        "OTEL_PROPAGATORS": "tracecontext,nosuch",
    }
    served = ServeProcess(env)
    try:
        url = served.start(timeout=60)
        assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
        served.signal(signal.SIGTERM)
        assert served.wait(30) == 0
        out = served.output
        assert "Traceback" not in out, out
        for line in (
            "OTEL_TRACES_EXPORTER: 'zipkin' is not available"
            " (install opentelemetry-exporter-zipkin); ignored",
            "OTEL_TRACES_SAMPLER: 'sometimes' is not available",
            "OTEL_PROPAGATORS: 'nosuch' is not available",
        ):
            assert sum(line in x for x in out.splitlines()) == 1, (line, out)
    finally:
        served.kill()
