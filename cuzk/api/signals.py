"""Checking circuit input values at the door: each must represent a field element.

The witness generator accepts a signal value as a JSON integer, an integral JSON number, or a
decimal or ``0x`` hexadecimal string, and reduces it modulo the scalar field order ``r``. Anything
else, and any number or string too long to be a field element at all, is refused here with a
400 that names the signal and says what is accepted, before any of it is converted: Python turns
a digit string of more than 4,300 digits into an ``int`` only with an exception, so an over-long
value must be rejected by its length, never by trying.
"""

from __future__ import annotations

import re
from typing import Any

from cuzk.curves import BLS12_381
from cuzk.errors import InputError

FIELD_ORDER = BLS12_381.r
MAX_DECIMAL_DIGITS = len(str(FIELD_ORDER))  # 77
MAX_HEX_DIGITS = (FIELD_ORDER.bit_length() + 3) // 4  # 64
_MAX_FLOAT_INTEGER = 2**53  # beyond it a JSON number with a fraction part is not exact
_DECIMAL = re.compile(r"[+-]?0*([0-9]+)")
_HEX = re.compile(r"0x0*([0-9a-fA-F]+)")
ACCEPTED = (
    "accepted: an integer n with -r < n < r (r is the BLS12-381 scalar field order, a"
    f" {MAX_DECIMAL_DIGITS}-digit number) as a JSON integer, a decimal string, or a 0x-prefixed"
    " hexadecimal string; or an array of such values for an array signal"
)


class BadSignalValue(InputError):
    """A circuit input value that is not a field element representation (HTTP 400)."""

    http_status = 400


class BadSignalName(InputError):
    """A signal name that is not Unicode text (a lone UTF-16 surrogate, which JSON's ``\\uXXXX``
    escapes can spell): no circuit has such a signal, and the witness generator hashes names as
    UTF-16, which cannot encode it (HTTP 422, as for any unknown signal)."""

    http_status = 422


def _not_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class OversizeNumber:
    """A JSON integer literal too long to be a field element, kept as its digit count so it is
    reported, not converted (see ``parse_json_int``)."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<a {self.digits}-digit number>"


_MAX_INT_LITERAL = MAX_DECIMAL_DIGITS + 8  # leading zeros and a sign still fit


def parse_json_int(text: str) -> int | OversizeNumber:
    """``json.loads(parse_int=...)``: integers short enough to be field elements become ints;
    longer ones become an ``OversizeNumber`` (json's own int() would raise past 4,300 digits)."""
    if len(text) > _MAX_INT_LITERAL:
        return OversizeNumber(text)
    return int(text)


def _problem(value: Any) -> str | None:
    """Why ``value`` is not a field element representation; None when it is one."""
    if isinstance(value, OversizeNumber):
        return f"a JSON number of {value.digits} digits is too large to be a field element"
    if isinstance(value, bool) or value is None:
        return f"{'null' if value is None else str(value).lower()} is not a number"
    if isinstance(value, int):
        return None if -FIELD_ORDER < value < FIELD_ORDER else "the number is not below r"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "the number is out of range"
        if not value.is_integer():
            return f"{value!r} is not an integer"
        if abs(value) > _MAX_FLOAT_INTEGER:
            return (
                "a JSON number written with a fraction or exponent is exact only up to 2^53;"
                " send larger values as integers or strings"
            )
        return None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_DECIMAL_DIGITS + 80:
            return f"a string of {len(value)} characters is too long to be a field element"
        if m := _DECIMAL.fullmatch(text):
            digits = m.group(1)
            if len(digits) > MAX_DECIMAL_DIGITS or int(digits) >= FIELD_ORDER:
                return "the number is not below r"
            return None
        if m := _HEX.fullmatch(text):
            digits = m.group(1)
            if len(digits) > MAX_HEX_DIGITS or int(digits, 16) >= FIELD_ORDER:
                return "the number is not below r"
            return None
        shown = text if len(text) <= 40 else text[:37] + "..."
        return f"the string {shown!r} is not a decimal or 0x-hexadecimal integer"
    if isinstance(value, dict):
        return "an object is not a number"
    return f"a {type(value).__name__} is not a number"


def check_signal_values(inputs: list[dict[str, Any]]) -> None:
    """Raise BadSignalName for a name that is not Unicode text, BadSignalValue for the first
    value in ``inputs`` that is not a field element representation, naming the partition and
    the signal (with its array index)."""
    for i, partition in enumerate(inputs):
        for name, value in partition.items():
            if _not_text(name):
                raise BadSignalName(
                    f"inputs[{i}]: input signal {name!a} is not a valid name: it holds a"
                    " lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), so it is"
                    " not Unicode text and names no signal of any circuit"
                )
            stack: list[tuple[str, Any]] = [(f"{name}", value)]
            while stack:  # iterative: nesting depth is the client's choice
                where, v = stack.pop()
                if isinstance(v, list):
                    stack.extend((f"{where}[{j}]", x) for j, x in reversed(list(enumerate(v))))
                    continue
                problem = _problem(v)
                if problem is not None:
                    raise BadSignalValue(
                        f"inputs[{i}]: input signal '{where}': {problem}; {ACCEPTED}"
                    )
