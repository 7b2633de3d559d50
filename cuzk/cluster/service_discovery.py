"""The head's Prometheus ``file_sd`` file: every live cuzk endpoint of the cluster.

Each worker actor serves its own ``/metrics``; the head asks every actor for its snapshot (1 s
timeout, the same read as ``/v1/status``) and writes those that answered, with labels ``node``
and ``role`` (and ``worker``), every ``interval_s``. A dead actor drops out at the next write,
so its series disappear with its target instead of freezing at their last value. The file is
replaced atomically (Prometheus may read it at any moment).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

INTERVAL_S = 5.0


def targets(nodes: Any, head: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """file_sd groups: one per answering actor (plus the head's own endpoint, if given)."""
    groups: list[dict[str, Any]] = []
    if head is not None:
        target, node = head
        groups.append({"targets": [target], "labels": {"node": node, "role": "head",
                                                       "worker": "head"}})
    for n in nodes:
        for w in n.workers:
            if w.state == "unreachable" or not w.metrics_url:
                continue
            target = w.metrics_url.removeprefix("http://").removesuffix("/metrics")
            groups.append({"targets": [target],
                           "labels": {"node": n.id, "role": w.kind, "worker": w.id}})
    return groups


def write(path: Path, groups: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".cuzk_sd.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(groups, f, indent=1)
    os.replace(tmp, path)


class SdWriter:
    """Writes ``path`` now and every ``interval_s`` from ``executor.nodes()``."""

    def __init__(self, executor: Any, path: Path, head: tuple[str, str] | None = None,
                 interval_s: float = INTERVAL_S) -> None:
        self.executor = executor
        self.path = path
        self.head = head
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cuzk-file-sd", daemon=True)

    def start(self) -> SdWriter:
        self.write_once()
        self._thread.start()
        return self

    def write_once(self) -> None:
        write(self.path, targets(self.executor.nodes(), self.head))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.write_once()
            except Exception:  # keep the last file; try again at the next tick
                log.exception("writing %s failed", self.path)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.interval_s + 2)
