"""The live ``cuzk status`` view in a real 80x24 terminal (tmux): a frame taller than the
terminal pages, with a visible "more below" mark, instead of being cut at line 24; the keys
reach every section, and ``q`` quits."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
from rich.console import Console

from cuzk.api.app import create_app
from cuzk.cli import status as status_cmd
from cuzk.cli._pager import Pager, read_keys
from cuzk.config import Config
from cuzk.serve_process import uvicorn_in_thread
from tests._doubles import make_test_engine
from tests._tools import require_tool

ROOT = Path(__file__).resolve().parents[3]
KINDS = {f"kind-{i}": (1, "normal") for i in range(6)}
BOUND_S = 20.0  # a loaded machine; the view refreshes every 0.2 s
START_BOUND_S = 60.0  # the first frame includes starting Python and importing rich and httpx


@pytest.fixture(scope="module")
def busy_server() -> Iterator[tuple[str, dict]]:
    """A real server whose status frame is far taller than 24 lines: twelve finished jobs."""
    engine, _, _ = make_test_engine(KINDS)
    with engine:
        for i in range(12):
            job = engine.submit(f"kind-{i % 6}", [{"tag": str(i)}])
            assert engine.wait(job.id, 10).state == "succeeded"
        config = uvicorn.Config(create_app(engine, Config()), host="127.0.0.1", port=0,
                                lifespan="off", log_level="warning")
        with uvicorn_in_thread(config) as url:
            yield url, engine.status()


def _wait_for(
    screen: Callable[[], str], ok: Callable[[str], bool], what: str, bound: float = BOUND_S
) -> str:
    deadline = time.monotonic() + bound
    while True:
        text = screen()
        if ok(text):
            return text
        assert time.monotonic() < deadline, f"{what} not seen within {bound} s:\n{text}"
        time.sleep(0.05)


def test_live_view_pages_in_an_80x24_terminal(busy_server: tuple[str, dict]) -> None:
    tmux = require_tool("tmux", hint="apt-get install tmux")
    url, snapshot = busy_server
    ids = [j["id"] for j in snapshot["jobs"]]  # in the table's order: the oldest job last
    sock = f"cuzk-test-{uuid.uuid4().hex[:8]}"
    base = [tmux, "-L", sock, "-f", "/dev/null"]
    cmd = (f"env PYTHONPATH={ROOT} {sys.executable} -m cuzk.cli.main status"
           f" --server {url} --interval 0.2; sleep 30")
    env = dict(os.environ, TERM="xterm-256color")
    subprocess.run([*base, "new-session", "-d", "-x", "80", "-y", "24", cmd], check=True,
                   env=env)

    def screen() -> str:
        return subprocess.run([*base, "capture-pane", "-p", "-t", "0"], check=True,
                              capture_output=True, text=True).stdout

    def keys(*names: str) -> None:
        subprocess.run([*base, "send-keys", "-t", "0", *names], check=True)

    try:
        top = _wait_for(screen, lambda s: "GPU workers" in s and "more below" in s, "top",
                        START_BOUND_S)
        lines = top.rstrip("\n").split("\n")
        assert len(lines) <= 24 and "more below" in lines[-1], top
        assert "Jobs (" not in top  # below the fold, and the footer says so
        keys("End")
        bottom = _wait_for(screen, lambda s: ids[-1] in s and "more below" not in s,
                           "the last job row")
        assert "above" in bottom
        # At 80 columns each job row has its proof kind on a detail line, so twelve jobs are
        # taller than one page: their section starts a page up, and every row is reached.
        keys("PageUp")
        title = _wait_for(screen, lambda s: "Jobs (0 active, 12 finished)" in s, "the jobs")
        assert "more below" in title and "above" in title
        assert all(i in bottom or i in title for i in ids), (bottom, title)
        keys("Home")
        _wait_for(screen, lambda s: "GPU workers" in s and "more below" in s, "top again")
        keys("PageDown")
        paged = _wait_for(screen, lambda s: "above" in s, "one page down")
        assert "cuzk 0.1" not in paged.split("\n")[0]
        keys("q")
        _wait_for(screen, lambda s: "GPU workers" not in s, "the view to quit on q")
    finally:
        subprocess.run([*base, "kill-server"], check=False, capture_output=True)


def test_pager_window_at_a_fixed_size(busy_server: tuple[str, dict]) -> None:
    """The same paging without a terminal: rich's console at 80x24."""
    _, snapshot = busy_server
    console = Console(width=80, height=24, file=io.StringIO(), color_system=None)
    frame = status_cmd.render(snapshot, width=80)
    pager = Pager()

    def shown() -> list[str]:
        lines = console.render_lines(pager.window(frame, console, 80, 24), pad=False)
        return ["".join(seg.text for seg in line).rstrip() for line in lines]

    first = shown()
    assert len(first) == 24 and "more below" in first[-1] and "lines 1-23 of" in first[-1]
    total = int(first[-1].split(" of ")[1].split()[0])
    assert total > 24 and not any(line.startswith("Jobs (") for line in first)
    for key in read_keys("\x1b[F"):  # End
        pager.press(key)
    last = shown()
    assert "more below" not in last[-1] and "above" in last[-1], last
    assert f"lines {total - 22}-{total} of {total}" in last[-1]
    pager.press("k")
    assert f"lines {total - 23}-{total - 1} of {total}" in shown()[-1]
    # Twelve jobs, each with its proof kind on a detail line at 80 columns, are taller than
    # one page: every job row and the section's title are reached by paging up from the end.
    seen = {line.split()[0] for line in last if line.split()}
    for key in read_keys("\x1b[5~" * (total // 23 + 1)):  # PgUp, until the section's title
        if any(line.startswith("Jobs (") for line in shown()):
            break
        pager.press(key)
        seen |= {line.split()[0] for line in shown() if line.split()}
    page = shown()
    assert any(line.startswith("Jobs (") for line in page) and "more below" in page[-1], page
    assert {j["id"] for j in snapshot["jobs"]} <= seen
    assert read_keys("\x1b[5~j\x1b[Bq") == ["pgup", "j", "down", "q"]
    assert pager.press("q") is False
