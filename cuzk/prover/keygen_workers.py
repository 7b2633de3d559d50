"""Worker processes for keygen's point sections (``python -m cuzk.prover.keygen_workers``).

Each worker reads tasks from stdin and writes results to stdout, both length-prefixed: a task
is a pickled ``(group, scalars)``, its result the bytes of
:func:`cuzk.prover.fixed_base.xy_bytes_of_multiples`. Plain subprocesses rather than
multiprocessing: ``spawn`` re-runs the caller's main script in every worker (a script without
an ``if __name__ == "__main__"`` guard would then start workers of its own), and ``fork``
copies a server's threads' locks.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from cuzk.tools import python_module_command

_LEN = 8  # bytes of a message's length prefix


def _write(stream: IO[bytes], payload: bytes) -> None:
    stream.write(len(payload).to_bytes(_LEN, "little"))
    stream.write(payload)
    stream.flush()


def _read(stream: IO[bytes]) -> bytes | None:
    """One message, or None at the end of the stream."""
    header = stream.read(_LEN)
    if len(header) < _LEN:
        return None
    size = int.from_bytes(header, "little")
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return payload


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The worker's loop: one result per task, until stdin closes."""
    from cuzk.prover.fixed_base import xy_bytes_of_multiples

    while (task := _read(stdin)) is not None:
        group, scalars = pickle.loads(task)
        _write(stdout, xy_bytes_of_multiples(group, scalars))


class WorkerError(RuntimeError):
    pass


class Workers:
    """``n`` worker processes; :meth:`run` yields the tasks' results in task order."""

    def __init__(self, n: int) -> None:
        root = str(Path(__file__).resolve().parents[2])  # the directory holding cuzk/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._procs = [
            subprocess.Popen(
                python_module_command(__name__),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            for _ in range(max(1, n))
        ]

    def run(self, tasks: Iterable[Any]) -> Iterator[bytes]:
        """Each task is pickled to a free worker; results come back in the tasks' order."""
        payloads = [pickle.dumps(t, protocol=pickle.HIGHEST_PROTOCOL) for t in tasks]
        results: list[bytes | None] = [None] * len(payloads)
        done = [threading.Event() for _ in payloads]
        todo: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in range(len(payloads)):
            todo.put(i)
        failure: list[str] = []

        def feed(proc: subprocess.Popen[bytes]) -> None:
            assert proc.stdin is not None and proc.stdout is not None
            while not failure:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    _write(proc.stdin, payloads[i])
                    result = _read(proc.stdout)
                except (OSError, ValueError) as e:  # ValueError: stdin closed by close()
                    result, reason = None, str(e)
                else:
                    reason = f"exit status {proc.poll()}"
                if result is None:
                    failure.append(f"keygen worker {proc.pid} failed ({reason})")
                    for event in done:
                        event.set()
                    return
                results[i] = result
                done[i].set()

        threads = [threading.Thread(target=feed, args=(p,), daemon=True) for p in self._procs]
        for t in threads:
            t.start()
        for i, event in enumerate(done):
            event.wait()
            if failure:
                raise WorkerError(failure[0])
            result, results[i] = results[i], None
            assert result is not None
            yield result
        for t in threads:
            t.join()

    def close(self) -> None:
        for proc in self._procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
