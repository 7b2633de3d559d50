"""A real ``cuzk serve`` child process: started on a free port, watched, signalled, killed.

The durability tests and ``cuzk bench durability`` drive the server exactly as an operator's
supervisor would (start, ``kill -9``, SIGTERM, restart), so what they check is the real process,
not an in-process stand-in. The child's output is collected by a reader thread (a full pipe
would stall the server) and kept for error messages.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from cuzk.tools import python_module_command

_LISTENING = re.compile(r"cuzk listening on (http://127\.0\.0\.1:(\d+))(?: \(backend (\w+))?")


class ServeFailed(RuntimeError):
    """The server exited or never became ready; the message carries its output."""


class ServeProcess:
    """``ServeProcess(env).start()`` -> URL; ``ready()``; ``kill()`` / ``terminate()``; ``wait()``.

    ``env`` is the whole environment of the child; ``CUZK_SERVER_LISTEN`` defaults to
    ``127.0.0.1:0`` (a free port, read back from the log line that names it). ``keep_lines``
    bounds the output kept (the last lines) for a server that runs for hours.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        args: tuple[str, ...] = (),
        keep_lines: int | None = None,
    ) -> None:
        self.env = {"CUZK_SERVER_LISTEN": "127.0.0.1:0", **env}
        self.args = args
        self.proc: subprocess.Popen[str] | None = None
        self.url: str | None = None
        self.port = 0
        self.backend: str | None = None  # as the listening line names it
        self.started_at = 0.0
        self._lines: deque[str] = deque(maxlen=keep_lines)
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> str:
        """Spawn the server and return its URL once it listens (ServeFailed if it exits)."""
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            python_module_command("cuzk.cli.main", "serve", *self.args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
        )
        self._reader = threading.Thread(target=self._read, name="serve-output", daemon=True)
        self._reader.start()
        deadline = self.started_at + timeout
        while not self._listening.wait(0.05):
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise ServeFailed(f"cuzk serve exited with {self.proc.returncode}:\n{self.output}")
            if time.monotonic() > deadline:
                self.kill()
                raise ServeFailed(f"cuzk serve did not listen within {timeout:g}s:\n{self.output}")
        assert self.url is not None
        return self.url

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self._lines.append(line)
            m = _LISTENING.search(line)
            if m and self.url is None:
                self.url, self.port, self.backend = m.group(1), int(m.group(2)), m.group(3)
                self._listening.set()

    def ready(self, timeout: float = 60.0) -> float:
        """Wait for ``/readyz`` 200; returns the seconds since ``start`` was called."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                try:
                    if client.get(f"{self.url}/readyz").status_code == 200:
                        return time.monotonic() - self.started_at
                except httpx.HTTPError:
                    pass
                if self.proc is not None and self.proc.poll() is not None:
                    raise ServeFailed(f"cuzk serve exited while starting:\n{self.output}")
                if time.monotonic() > deadline:
                    raise ServeFailed(f"/readyz not 200 within {timeout:g}s:\n{self.output}")
                time.sleep(0.02)

    def kill(self) -> None:
        """``kill -9``: no handler runs, nothing is flushed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def signal(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, then ``kill -9`` if it has not exited within ``timeout``; the exit status."""
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def wait(self, timeout: float) -> int:
        """The exit status (after the output is read to its end)."""
        assert self.proc is not None
        code = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(5)
        return code

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def output(self) -> str:
        with self._lock:
            return "".join(self._lines)

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


@contextmanager
def uvicorn_in_thread(config: uvicorn.Config, timeout: float = 10.0) -> Iterator[str]:
    """An app under uvicorn in a thread of this process, for tests that need a real socket but
    a stand-in engine: yields its URL once it listens (port 0 in ``config``: a free one), stops
    it on exit."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise ServeFailed(f"uvicorn did not start within {timeout:g}s")
        time.sleep(0.01)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)


def clean_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without any ``CUZK_*``/``OTEL_*``
    setting, so a child server runs on its embedded defaults."""
    source = os.environ if base is None else base
    return {k: v for k, v in source.items() if not k.startswith(("CUZK_", "OTEL_"))}


def serve_env(
    journal: Path | None,
    keys_dir: Path | None = None,
    base: Mapping[str, str] | None = None,
    **settings: str,
) -> dict[str, str]:
    """An environment for a private server: no inherited ``CUZK_*``/``OTEL_*`` settings, CPU
    backend, tracing off, the given journal (None: journal disabled) and key cache.
    ``settings``: more ``CUZK_*`` variables, e.g. ``CUZK_SERVER_DRAIN_TIMEOUT_S="10"``."""
    env = clean_env(base)
    env |= {"CUZK_ENGINE_BACKEND": "cpu", "CUZK_TELEMETRY_TRACING": "false"}
    if journal is None:
        env["CUZK_JOURNAL_ENABLED"] = "false"
    else:
        env["CUZK_JOURNAL_PATH"] = str(journal)
    if keys_dir is not None:
        env["CUZK_ENGINE_KEYS_DIR"] = str(keys_dir)
    env |= settings
    return env


def read_journal(path: Path) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, int], str]]:
    """(jobs by id, proof JSON by (job id, partition)) from a *copy* of a journal no server
    holds (the database and its WAL), so reading it changes nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in ("", "-wal"):
            src = Path(str(path) + suffix)
            if src.exists():
                shutil.copy(src, Path(tmp) / (path.name + suffix))
        db = sqlite3.connect(Path(tmp) / path.name)
        try:
            jobs = {
                r[0]: {"request_id": r[1], "proof_kind": r[2], "state": r[3], "attempt": r[4],
                       "error": r[5]}
                for r in db.execute(
                    "SELECT id, request_id, proof_kind, state, attempt, error FROM jobs")
            }
            proofs = {(r[0], r[1]): r[2]
                      for r in db.execute("SELECT job_id, idx, proof FROM partitions")}
        finally:
            db.close()
    return jobs, proofs


def submit_until_accepted(
    url: Callable[[], str | None], body: dict[str, Any], deadline: float
) -> dict[str, Any]:
    """POST until a 202, riding out restarts: connection errors and 503s are retried against
    whatever URL ``url()`` gives now (None while no server runs)."""
    last = "never reached"
    while time.monotonic() < deadline:
        base = url()
        if base is not None:
            try:
                r = httpx.post(f"{base}/v1/proofs", json=body, timeout=30)
                if r.status_code == 202:
                    return r.json()
                last = f"{r.status_code} {r.text}"
                if r.status_code != 503:
                    raise RuntimeError(f"submit of {body.get('request_id')} refused: {last}")
            except httpx.HTTPError as e:
                last = repr(e)
        time.sleep(0.05)
    raise TimeoutError(f"submit of {body.get('request_id')} never accepted: {last}")
