"""The uvicorn (and h11) internals cuzk builds on, checked against the installed versions.

``cuzk.api.server.GuardedH11Protocol`` subclasses uvicorn's ``H11Protocol`` (deadlines on slow
clients, the connection cap, JSON for malformed HTTP) and ``cuzk.cli.serve._Server`` subclasses
``uvicorn.Server`` (the drain on SIGTERM); docs/interfaces.md says why no public hook does it.
These tests fail on an uvicorn whose internals moved: an overridden method whose signature or
caller changed, an attribute the subclasses read that is no longer there, or an install (or pin)
other than the one this contract was checked on. Raising the pin means running these tests and
the slow-client tests on the new version, then updating ``CHECKED_ON``.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import socket
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import h11
import pytest
import uvicorn
import uvicorn.server
from packaging.requirements import Requirement
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from cuzk.api import server as guarded
from cuzk.api.server import GuardedH11Protocol, protocol_class
from cuzk.cli import serve
from cuzk.config import Config

ROOT = Path(__file__).resolve().parents[3]
CHECKED_ON = {"uvicorn": "0.54.0", "h11": "0.16.0"}
"""The versions the internals below were read on (and the slow-client tests passed on)."""
NEXT_MINOR = {"uvicorn": "0.55.0", "h11": "0.17.0"}

# What each subclass overrides: a new override joins the contract by being listed here.
PROTOCOL_OVERRIDES = {
    "connection_made", "connection_lost", "data_received", "on_response_complete", "shutdown",
    "pause_writing", "resume_writing", "send_400_response",
}
SERVER_OVERRIDES = {"handle_exit", "startup"}
# Constructor signatures the subclasses pass through (uvicorn makes the protocol per connection).
BASE_INIT = {
    H11Protocol: ["self", "config", "server_state", "app_state", "_loop"],
    uvicorn.Server: ["self", "config"],
}


def _class_node(path: Path, name: str) -> ast.ClassDef:
    tree = ast.parse(path.read_text())
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _self_reads(node: ast.ClassDef) -> tuple[set[str], dict[str, set[str]]]:
    """``self.X`` names the class reads or writes but does not define itself (uvicorn's), and
    for each such X the names used on it (``self.cycle.response_started`` -> {"cycle":
    {"response_started"}})."""
    own = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for n in node.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            own.add(n.target.id)
        elif isinstance(n, ast.Assign):
            own.update(t.id for t in n.targets if isinstance(t, ast.Name))
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef)
                 and n.name == "__init__"), None)
    # Only what the subclass's own __init__ sets is its own: a name it only assigns elsewhere
    # (``self.should_exit = True``) is uvicorn's, and uvicorn must still read it.
    for n in ast.walk(init) if init is not None else ():
        targets = n.targets if isinstance(n, ast.Assign) else (
            [n.target] if isinstance(n, ast.AnnAssign) else [])
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                    and t.value.id == "self":
                own.add(t.attr)
    used: set[str] = set()
    chained: dict[str, set[str]] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            used.add(n.attr)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) \
                and isinstance(n.value.value, ast.Name) and n.value.value.id == "self":
            chained.setdefault(n.value.attr, set()).add(n.attr)
    base = used - own
    return base, {k: v for k, v in chained.items() if k in base}


def _shape(fn: Any) -> list[tuple[str, Any, bool]]:
    """A signature as what a caller depends on: each parameter's name, kind and whether it
    has a default (annotations aside: they are not checked at run time)."""
    return [(p.name, p.kind, p.default is inspect.Parameter.empty)
            for p in inspect.signature(fn).parameters.values()]


# ---- versions and pins ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CHECKED_ON))
def test_the_installed_and_pinned_versions_are_the_ones_the_contract_was_checked_on(
    name: str,
) -> None:
    assert version(name) == CHECKED_ON[name], (
        f"{name} {version(name)} is installed; this contract was checked on {CHECKED_ON[name]}: "
        "run these tests and tests/cuzk/api/test_api_slow_clients.py on it, then update "
        "CHECKED_ON and the pins")
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "constraints.txt").read_text(),
                           re.M))
    assert pins.get(name) == CHECKED_ON[name], f"constraints.txt pins {name}=={pins.get(name)}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    req = next(r for r in reqs if r.name == name)
    assert CHECKED_ON[name] in req.specifier, f"pyproject.toml's {req} excludes the checked one"
    assert NEXT_MINOR[name] not in req.specifier, (
        f"pyproject.toml's {req} admits {NEXT_MINOR[name]}, whose internals were never checked")


# ---- overridden methods ----------------------------------------------------------------------


@pytest.mark.parametrize(("sub", "base", "listed"), [
    (GuardedH11Protocol, H11Protocol, PROTOCOL_OVERRIDES),
    (serve._Server, uvicorn.Server, SERVER_OVERRIDES),
], ids=["protocol", "server"])
def test_each_override_matches_the_base_method_it_replaces(
    sub: type, base: type, listed: set[str]
) -> None:
    overrides = {name for name, value in vars(sub).items()
                 if callable(value) and name != "__init__" and hasattr(base, name)}
    assert overrides == listed, "the overrides changed: list them in this contract"
    for name in sorted(overrides):
        assert _shape(getattr(base, name)) == _shape(getattr(sub, name)), (
            f"{base.__name__}.{name}{inspect.signature(getattr(base, name))} is not what "
            f"{sub.__name__}.{name} overrides")
        assert inspect.iscoroutinefunction(getattr(base, name)) == \
            inspect.iscoroutinefunction(getattr(sub, name)), name
    assert [p[0] for p in _shape(base.__init__)] == BASE_INIT[base]


def test_uvicorn_still_calls_the_hooks_the_subclasses_override() -> None:
    """An override uvicorn no longer calls would fail silently: look at the callers."""
    events = inspect.getsource(H11Protocol.handle_events)
    assert re.search(r"except h11\.RemoteProtocolError:(.|\n)*?self\.send_400_response\(",
                     events), "malformed HTTP no longer reaches send_400_response"
    assert "on_response=self.on_response_complete" in events
    assert "self.handle_events()" in inspect.getsource(H11Protocol.data_received)
    assert "connection.shutdown()" in inspect.getsource(uvicorn.Server.shutdown)
    assert "self.handle_exit" in inspect.getsource(uvicorn.Server.capture_signals)
    assert "await self.startup(" in inspect.getsource(uvicorn.Server._serve)
    assert "self.should_exit" in inspect.getsource(uvicorn.Server.on_tick)  # the drain's end


# ---- attributes read on uvicorn's objects ----------------------------------------------------


def _app() -> Starlette:
    async def hello(request: Any) -> PlainTextResponse:
        return PlainTextResponse("hello")

    return Starlette(routes=[Route("/", hello)])


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[H11Protocol, RequestResponseCycle, uvicorn.Config]]:
    """A GuardedH11Protocol that served one request on loopback: (protocol, its cycle, the
    uvicorn config)."""
    made: list[H11Protocol] = []
    cls = protocol_class(Config())

    class Recording(cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    config = uvicorn.Config(_app(), http=Recording, lifespan="off", log_level="warning")
    config.load()

    async def one_request() -> None:
        state = uvicorn.server.ServerState()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: Recording(config=config, server_state=state, app_state={}),
            "127.0.0.1", 0, family=socket.AF_INET)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)  # a bound, not a pause
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"hello"), answer
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(one_request())
    assert len(made) == 1 and made[0].cycle is not None
    yield made[0], made[0].cycle, config


def test_every_attribute_the_protocol_reads_on_uvicorns_objects_exists(
    live: tuple[H11Protocol, RequestResponseCycle, uvicorn.Config],
) -> None:
    protocol, cycle, config = live
    base, chained = _self_reads(_class_node(Path(guarded.__file__), "GuardedH11Protocol"))
    # The class reads uvicorn's per-connection state (and calls nothing else of it).
    assert {"loop", "transport", "conn", "cycle", "client", "config", "connections"} <= base
    missing = sorted(a for a in base if not hasattr(protocol, a))
    assert not missing, f"H11Protocol no longer has {missing}"
    on = {"cycle": cycle, "config": config, "conn": protocol.conn}
    for owner, names in sorted(chained.items()):
        if owner in on:
            gone = sorted(n for n in names if not hasattr(on[owner], n))
            assert not gone, f"uvicorn's {owner} no longer has {gone}"
    assert {"response_complete", "response_started", "disconnected", "message_event"} \
        <= chained["cycle"]
    assert isinstance(cycle.message_event, asyncio.Event)
    assert protocol.connections is protocol.server_state.connections
    assert isinstance(h11._connection.DEFAULT_MAX_INCOMPLETE_EVENT_SIZE, int)


def test_every_attribute_the_drain_reads_on_uvicorns_server_exists() -> None:
    """A real uvicorn.Server on loopback: once started it has what _Server reads, and setting
    ``should_exit`` (what the drain does when it is done) stops it."""
    base, _ = _self_reads(_class_node(Path(serve.__file__), "_Server"))
    assert {"should_exit", "started", "servers"} <= base
    server = uvicorn.Server(uvicorn.Config(_app(), lifespan="off", log_level="warning"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))

    async def run() -> list[str]:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        async with asyncio.timeout(10):  # a bound on the start, not a pause
            while not server.started:
                await asyncio.sleep(0.01)
        missing = sorted(a for a in base if not hasattr(server, a))
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        return missing

    try:
        missing = asyncio.run(run())
    finally:
        sock.close()
    assert not missing, f"uvicorn.Server no longer has {missing}"
    assert isinstance(server.servers, list) and server.servers
