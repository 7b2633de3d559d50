"""Cluster tests run inside a private network namespace with only loopback up.

Ray binds the machine's own interface unless it has nothing but ``lo``
(docs/cluster-design.md section 4), so the Ray cluster of these tests never starts in the test
process itself: the selected modules run once more, together in one pytest process (sharing one
cluster), under ``unshare -n`` (``ip link set lo up`` first), and every test here reports the
outcome its twin had in there. Without Ray, ``unshare`` or the privilege to use it, the tests
skip with the reason, and fail under ``CI=true``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._tools import _missing

IN_NAMESPACE = os.environ.get("CUZK_TEST_NETNS") == "1"
ROOT = Path(__file__).resolve().parents[2]
MODULE_TIMEOUT_S = 240  # per module, for the one run of them all
MB = 1 << 20


@functools.cache
def _namespace_problem() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed (pip install -e '.[cluster]')"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare and ip (util-linux, iproute2) are needed for a private network namespace"
    errors = []
    for flags in UNSHARE_FLAGS:
        probe = subprocess.run(["unshare", *flags, "--", "ip", "link", "set", "lo", "up"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return None
        errors.append(f"unshare {' '.join(flags)}: {probe.stderr.strip()}")
    return "cannot create a network namespace (" + "; ".join(errors) + ")"


UNSHARE_FLAGS = (["-n"], ["-r", "-n"])
"""As root, a network namespace; otherwise inside a user namespace mapping us to root."""


@functools.cache
def _unshare_flags() -> list[str]:
    for flags in UNSHARE_FLAGS:
        if subprocess.run(["unshare", *flags, "--", "true"], capture_output=True).returncode == 0:
            return flags
    return ["-n"]


_RESULTS: dict[tuple[str, str], tuple[str, str]] = {}
"""(module name, test name) -> (outcome, message) from the run inside the namespace."""


def _run_modules(paths: list[Path], tmp: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """Run the test modules inside ``unshare -n``, all in one pytest process so that they share
    one Ray cluster (``_cluster.two_nodes``); (module, test name) -> (outcome, message)."""
    report = tmp / "cluster.xml"
    env = {**os.environ, "CUZK_TEST_NETNS": "1", "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    script = 'ip link set lo up && exec "$0" "$@"'
    cmd = ["unshare", *_unshare_flags(), "--", "sh", "-c", script, sys.executable, "-m",
           "pytest", "-q", "-p", "no:cacheprovider", "--durations=0", f"--junitxml={report}",
           *map(str, paths)]
    timeout = MODULE_TIMEOUT_S * len(paths)
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        tail = (proc.stdout + proc.stderr)[-6000:]
    except subprocess.TimeoutExpired as exc:
        tail = f"timed out after {timeout} s\n{exc.stdout!s}"[-6000:]
    results: dict[tuple[str, str], tuple[str, str]] = {}
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            outcome, message = "passed", ""
            for tag in ("failure", "error", "skipped"):
                el = case.find(tag)
                if el is not None:
                    outcome = tag
                    message = (el.get("message") or "") + "\n" + (el.text or "")
            module = case.get("classname", "").rsplit(".", 1)[-1]
            results[(module, case.get("name", ""))] = (outcome, message)
    results[("", "__output__")] = ("", tail)
    return results


@pytest.fixture(scope="module")
def in_namespace() -> bool:
    """True inside the namespace (the module's own fixtures may start Ray there)."""
    return IN_NAMESPACE


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Outside the namespace a test reports its twin's outcome instead of running."""
    if IN_NAMESPACE:
        return None
    if not _RESULTS:
        here = Path(__file__).parent
        paths = sorted({Path(str(item.fspath)) for item in pyfuncitem.session.items
                        if Path(str(item.fspath)).parent == here})
        tmp = Path(pyfuncitem.config._tmp_path_factory.mktemp("netns"))
        _RESULTS.update(_run_modules(paths, tmp))
    module = Path(str(pyfuncitem.fspath)).stem
    outcome, message = _RESULTS.get((module, pyfuncitem.name), ("missing", ""))
    if outcome == "passed":
        return True
    if outcome == "skipped":
        pytest.skip(message.strip().splitlines()[0] if message.strip() else "skipped inside")
    output = _RESULTS[("", "__output__")][1]
    pytest.fail(f"inside the network namespace: {outcome}\n{message}\n--- output ---\n{output}",
                pytrace=False)
    return None


@pytest.fixture(scope="session", autouse=True)
def _shared_cluster() -> Iterator[None]:
    """Inside the namespace: the cluster the modules shared ends with the run."""
    yield
    if IN_NAMESPACE:
        from tests.cluster._cluster import shutdown_shared

        shutdown_shared()


@pytest.fixture(autouse=True)
def _cluster_prerequisites() -> Iterator[None]:
    if not IN_NAMESPACE:
        problem = _namespace_problem()
        if problem is not None:
            _missing(problem)
    yield
