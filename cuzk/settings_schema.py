"""How a setting is declared, once: its default as spelled in TOML, one line saying what it does,
and the parser that turns a TOML value or an environment string into the typed value.

The application's sections (``cuzk.config``) are pydantic models whose fields validate with these
parsers. The engine's settings (``cuzk.engine.settings``) declare their keys with :func:`setting`
on a plain dataclass, since the engine does not import pydantic; ``cuzk.config`` builds the
``[engine]`` model from those declarations. So a default is written in exactly one place.
Standard library only, because the engine and the HTTP clients (``parse_duration``) import it.

Parsers take the raw value and a :class:`ParseContext`; they raise ``ValueError`` with a message
that does not name the key (the loader prefixes the key and the variable it came from). Each
accepts its own result unchanged, so a section built in code from typed values validates too.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FIELD_ARITH",
    "MSM_PRECOMPUTE",
    "MSM_PRECOMPUTE_BUDGET_SHARE",
    "REQUIRED",
    "ParseContext",
    "Setting",
    "boolean",
    "byte_size",
    "byte_size_or_auto",
    "choice",
    "devices",
    "int_or_auto",
    "non_empty_string",
    "optional_duration",
    "optional_path",
    "optional_string",
    "parse_duration",
    "parse_listen",
    "path",
    "phase_seconds",
    "positive_int",
    "positive_seconds",
    "secret_string",
    "setting",
    "settings_of",
    "split_listen",
    "xdg_path",
]


# The CPU prover's choices ([prover] keys), spelled here so that the prover reads them without
# importing cuzk.config (and pydantic with it).
FIELD_ARITH = ("auto", "portable")
MSM_PRECOMPUTE = ("auto", "off", "on")
# auto builds a key's window tables when they take at most this share of the host memory budget.
MSM_PRECOMPUTE_BUDGET_SHARE = 16


@dataclass(frozen=True)
class ParseContext:
    """What a parser may need besides the value: where relative paths start, and the environment
    that defaults such as ``$XDG_STATE_HOME`` come from (``os.environ`` when None)."""

    base: Path | None = None
    env: Mapping[str, str] | None = None

    def getenv(self, name: str) -> str | None:
        return (os.environ if self.env is None else self.env).get(name)


Parser = Callable[[Any, ParseContext], Any]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # a key with no default (a proof kind's r1cs when it is not bundled)


@dataclass(frozen=True)
class Setting:
    """One key: ``default`` is the TOML spelling (parsed to give the field's default)."""

    default: Any
    doc: str
    parse: Parser
    secret: bool = False  # never printed: not in repr, dumps or error messages
    env_fallback: str | None = None  # a standard variable used when the key is not set
    example: Any = None  # shown in the generated file for a key without a default


def setting(
    default: Any,
    doc: str,
    parse: Parser,
    *,
    secret: bool = False,
    env_fallback: str | None = None,
    example: Any = None,
) -> Any:
    """A dataclass field whose default is ``parse(default)``, carrying its :class:`Setting`."""
    spec = Setting(default, doc, parse, secret, env_fallback, example)
    metadata = {"setting": spec}
    if default is REQUIRED:
        return dataclasses.field(metadata=metadata, repr=not secret)
    return dataclasses.field(
        default_factory=lambda: parse(default, ParseContext()), metadata=metadata, repr=not secret
    )


def settings_of(cls: type) -> dict[str, Setting]:
    """The declared keys of a settings dataclass, in declaration order."""
    return {
        f.name: f.metadata["setting"] for f in dataclasses.fields(cls) if "setting" in f.metadata
    }


# --------------------------------------------------------------------------- parsers


def _got(value: object) -> str:
    return f"got {value!r}"


def _int(value: object, *, minimum: int, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, {_got(value)}")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        result = int(value)
    else:
        raise ValueError(f"must be {what}, {_got(value)}")
    if result < minimum:
        raise ValueError(f"must be {what}, {_got(value)}")
    return result


def positive_int(value: object, ctx: ParseContext | None = None) -> int:
    return _int(value, minimum=1, what="a positive integer")


def non_negative_int(value: object, ctx: ParseContext | None = None) -> int:
    return _int(value, minimum=0, what="an integer >= 0")


def int_or_auto(auto: Callable[[], int | None]) -> Parser:
    """A positive integer, or ``"auto"``, which becomes ``auto()`` (a count sized from the host,
    or None where it is sized later; None is taken back as "auto")."""

    def parse(value: object, ctx: ParseContext | None = None) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
            return auto()
        return _int(value, minimum=1, what='a positive integer or "auto"')

    return parse


def positive_seconds(value: object, ctx: ParseContext | None = None) -> float:
    """A duration in seconds: an integer or a decimal number, greater than zero."""
    what = "a positive number of seconds"
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, {_got(value)}")
    if isinstance(value, int | float) or (
        isinstance(value, str) and re.fullmatch(r"\s*\d+(?:\.\d*)?\s*", value)
    ):
        result = float(value)
    else:
        raise ValueError(f"must be {what}, {_got(value)}")
    if not result > 0 or result == float("inf"):
        raise ValueError(f"must be {what}, {_got(value)}")
    return result


_DURATION_UNITS = {"": 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "min": 60.0, "h": 3600.0,
                   "d": 86400.0}


def parse_duration(value: object) -> float:
    """A positive duration: seconds as a number, or a string such as ``"30s"``, ``"25m"``,
    ``"1.5h"``, ``"250ms"``, ``"7d"``."""
    what = 'a positive duration such as 20, "30s", "25m" or "1h"'
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, {_got(value)}")
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str) and (
            m := re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(ms|s|min|m|h|d)?\s*", value.lower())):
        result = float(m.group(1)) * _DURATION_UNITS[m.group(2) or ""]
    else:
        raise ValueError(f"must be {what}, {_got(value)}")
    if not result > 0 or result == float("inf"):
        raise ValueError(f"must be {what}, {_got(value)}")
    return result


def duration_text(seconds: float) -> str:
    """A duration as :func:`parse_duration` reads it: ``7d``, ``36h``, ``90m`` or ``45s`` (the
    largest unit that divides it, else seconds)."""
    for unit in ("d", "h", "m"):
        size = _DURATION_UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def duration(value: object, ctx: ParseContext | None = None) -> float:
    """A duration (:func:`parse_duration`)."""
    return parse_duration(value)


def optional_duration(value: object, ctx: ParseContext | None = None) -> float | None:
    """A duration (:func:`parse_duration`), or ``""`` for none."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_duration(value)


def phase_seconds(value: object, ctx: ParseContext | None = None) -> tuple[tuple[str, float], ...]:
    """A table of phase -> seconds (``{synthesizing = 0.8, proving = 2.5, finalizing = 0.4}``;
    from the environment ``"synthesizing=0.8,proving=2.5"``), or ``""`` for none."""
    from cuzk.protocol import PREDICTED_PHASES

    what = "a table of phase = seconds"
    if isinstance(value, tuple):  # already parsed
        value = dict(value)
    if isinstance(value, str):
        if not value.strip():
            return ()
        table: dict[str, object] = {}
        for part in value.split(","):
            name, sep, num = part.partition("=")
            if not sep:
                raise ValueError(f"must be {what} (name=seconds,...), {_got(value)}")
            table[name.strip()] = num.strip()
        value = table
    if not isinstance(value, dict):
        raise ValueError(f"must be {what}, {_got(value)}")
    out = []
    for name, seconds in value.items():
        if name not in PREDICTED_PHASES:
            raise ValueError(f"phase {name!r} is not one of {', '.join(PREDICTED_PHASES)}")
        if isinstance(seconds, str):
            seconds = seconds.strip()
            try:
                seconds = float(seconds)
            except ValueError:
                raise ValueError(f"{name}: must be a number of seconds, {_got(seconds)}") from None
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                or not 0 <= seconds < float("inf"):
            raise ValueError(f"{name}: must be a number of seconds >= 0, {_got(seconds)}")
        out.append((str(name), float(seconds)))
    return tuple(sorted(out))


_BYTE_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "kib": 2**10, "kb": 10**3,
    "m": 2**20, "mib": 2**20, "mb": 10**6,
    "g": 2**30, "gib": 2**30, "gb": 10**9,
    "t": 2**40, "tib": 2**40, "tb": 10**12,
}  # fmt: skip


def byte_size(value: object, ctx: ParseContext | None = None) -> int:
    """A byte count: an integer, or a string such as ``"8GiB"``, ``"512 MiB"``, ``"2GB"``."""
    what = 'a byte size (an integer or a string such as "8GiB")'
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, {_got(value)}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must be {what} >= 0, {_got(value)}")
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _BYTE_UNITS:
            return int(float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()])
    raise ValueError(f"must be {what}, {_got(value)}")


def positive_byte_size(value: object, ctx: ParseContext | None = None) -> int:
    """A byte count above zero (a reserve that cannot be empty)."""
    result = byte_size(value)
    if result == 0:
        raise ValueError(f"must be a byte size > 0, {_got(value)}")
    return result


def byte_size_or_auto(value: object, ctx: ParseContext | None = None) -> int | None:
    """``"auto"`` (None): the engine sizes it from the machine (total minus the safety margin)."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    try:
        result = byte_size(value)
    except ValueError:
        raise ValueError(
            f'must be "auto" or a byte size (an integer or a string such as "8GiB"), {_got(value)}'
        ) from None
    if result == 0:
        raise ValueError(f'must be "auto" or a byte size > 0, {_got(value)}')
    return result


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def boolean(value: object, ctx: ParseContext | None = None) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"must be a boolean (true/false), {_got(value)}")


def non_empty_string(value: object, ctx: ParseContext | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty string, {_got(value)}")
    return value.strip()


def optional_string(value: object, ctx: ParseContext | None = None) -> str | None:
    """An empty string means "not set", so an env variable can clear a value from the file."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return non_empty_string(value)


def secret_string(value: object, ctx: ParseContext | None = None) -> str:
    """A credential; "" means none. Its value never appears in an error message (its shape is
    checked where it is used, ``cuzk.api.auth``, which names the key without the value)."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string (value not shown), got a {type(value).__name__}")
    return value.strip()


def choice(options: tuple[str, ...]) -> Parser:
    def parse(value: object, ctx: ParseContext | None = None) -> str:
        if isinstance(value, str) and value.strip().lower() in options:
            return value.strip().lower()
        raise ValueError(f"must be one of {', '.join(options)}; {_got(value)}")

    return parse


def split_listen(value: object) -> tuple[str, int]:
    what = "must be HOST:PORT (for example 127.0.0.1:9820)"
    if not isinstance(value, str) or ":" not in value:
        raise ValueError(f"{what}, {_got(value)}")
    host, _, port_text = value.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{what}, {_got(value)}")
    return host, int(port_text)


def parse_listen(value: object, ctx: ParseContext | None = None) -> str:
    """``HOST:PORT`` (IPv6 hosts in brackets); returns it normalized."""
    host, port = split_listen(value)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def path(value: object, ctx: ParseContext | None = None) -> Path:
    """A path; ``~`` is expanded and a relative path is taken from the config file's directory."""
    if isinstance(value, Path):  # already parsed
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty path string, {_got(value)}")
    p = Path(value.strip()).expanduser()
    if not p.is_absolute():
        p = ((ctx.base if ctx else None) or Path.cwd()) / p
    return p


def optional_path(value: object, ctx: ParseContext | None = None) -> Path | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return path(value, ctx)


def xdg_path(variable: str, fallback: str, *parts: str) -> Parser:
    """A path; "" means ``$<variable>/<parts>``, or ``~/<fallback>/<parts>`` when the variable is
    unset or not absolute (the XDG base directory rule), read from the context's environment."""

    def parse(value: object, ctx: ParseContext | None = None) -> Path:
        if isinstance(value, Path):  # already parsed
            return value
        if not isinstance(value, str):
            default = "/".join(["$" + variable, *parts])
            raise ValueError(f'must be a path string ("" = {default}), {_got(value)}')
        if not value.strip():
            root = (ctx or ParseContext()).getenv(variable) or ""
            if not Path(root).is_absolute():
                root = str(Path.home() / fallback)
            return Path(root).joinpath(*parts)
        return path(value, ctx)

    return parse


def devices(value: object, ctx: ParseContext | None = None) -> tuple[int, ...] | None:
    """``"all"`` (None), a list of device indices, or a comma-separated string of them."""
    what = 'must be "all" or a list of CUDA device indices such as [0, 1] or "0,1"'
    if value is None:  # already parsed: all
        return None
    if isinstance(value, str):
        if value.strip().lower() == "all":
            return None
        parts: list[Any] = [p.strip() for p in value.split(",")]
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        raise ValueError(f"{what}, {_got(value)}")
    try:
        found = tuple(_int(p, minimum=0, what="an index") for p in parts)
    except ValueError:
        raise ValueError(f"{what}, {_got(value)}") from None
    if not found or len(set(found)) != len(found):
        raise ValueError(f"{what} (non-empty, no repeats), {_got(value)}")
    return found
