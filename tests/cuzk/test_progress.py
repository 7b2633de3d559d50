"""cuzk.progress: steps reach the listener of their context only, from threads handed the
listener; with nobody listening a step costs nothing and goes nowhere."""

from __future__ import annotations

import threading

from cuzk import progress


def test_steps_reach_the_listener_of_their_context_and_stop_with_it() -> None:
    heard: list[str] = []
    progress.step("before")  # nobody listening: dropped
    with progress.reporting(heard.append):
        progress.step("witness")
        inner: list[str] = []
        with progress.reporting(inner.append):
            progress.step("nested")
        progress.step("a/b/c")
    progress.step("after")
    assert heard == ["witness", "a/b/c"] and inner == ["nested"]


def test_a_thread_reports_through_the_listener_it_was_handed() -> None:
    heard: list[str] = []
    with progress.reporting(heard.append):
        sink = progress.current()
        t = threading.Thread(target=sink, args=("MSM B2 done, 1/5",))
        t.start()
        t.join()
        other = threading.Thread(target=progress.step, args=("lost",))  # not handed: dropped
        other.start()
        other.join()
    assert heard == ["MSM B2 done, 1/5"]
