"""Every bench says what it does and what each option means, with its default (issue 29: the
benches' --jobs/--seed/--scale had no help, `bench engine` no description). Run as a user runs
it: ``cuzk bench NAME --help`` in a subprocess."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from cuzk.cli.main import build_parser

BENCHES = ("prover", "engine", "soak", "durability", "deadlines", "cluster")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _entries(text: str) -> dict[str, str]:
    """Each option's entry in a --help text, by its first name: its line at indent 2 and the
    deeper-indented lines under it (argparse puts the help of a long invocation below it)."""
    entries: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if indent == 2:
            name = line.split()[0].rstrip(",")
            entries[name] = line
        elif indent > 2 and name is not None:
            entries[name] += " " + line.strip()
        else:
            name = None
    return entries


def test_the_list_of_benches_is_whole():
    assert set(_subparsers(_subparsers(build_parser("bench"))["bench"])) == set(BENCHES)


@pytest.mark.parametrize("bench", BENCHES)
def test_bench_help_describes_the_bench_and_every_option_with_its_default(bench):
    parser = _subparsers(_subparsers(build_parser("bench"))["bench"])[bench]
    # A wide terminal: no option's help is wrapped, so each one reads as a single line.
    env = {**os.environ, "COLUMNS": "1000"}
    out = subprocess.run([sys.executable, "-m", "cuzk.cli.main", "bench", bench, "--help"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    text = out.stdout
    assert text.startswith(f"usage: cuzk bench {bench}")
    description = " ".join((parser.description or "").split())
    assert len(description.split()) >= 8, f"bench {bench} has no description"
    assert description.replace("%%", "%") in " ".join(text.split())
    entries = _entries(text)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        line = entries.get(name, "")
        words = line.split()[1 if action.option_strings else 0:]
        assert action.help and len(words) > 2, f"bench {bench} {name}: no help: {line!r}"
        if action.default not in (None, False):
            shown = {str(action.default), format(action.default, "g")
                     if isinstance(action.default, float) else str(action.default)}
            assert any(f"default: {s}" in line for s in shown), (
                f"bench {bench} {name}: default {action.default!r} not shown: {line.strip()!r}")
