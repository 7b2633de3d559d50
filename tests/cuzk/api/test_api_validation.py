"""Requests are validated by the protocol's pydantic shapes, and every refusal is told in the
project's words: each field named, what it must be, never pydantic's text, at a bounded cost."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuzk.api.signals import parse_json_int
from cuzk.api.validation import PROOF_QUERY, SUBMIT, RequestInvalid
from cuzk.protocol_requests import MAX_REQUEST_ID_CHARS

OK = {"proof_kind": "porep-c2", "inputs": [{"tag": "1"}]}


def refusal(body: Any) -> str:
    with pytest.raises(RequestInvalid) as e:
        SUBMIT.validate(body)
    return str(e.value)


def test_every_problem_is_told_at_once() -> None:
    message = refusal({"proof_kind": "", "inputs": 3, "priority": "urgent",
                       "deadline": "soon", "request_id": "r" * 300})
    assert message == (
        "'proof_kind' must be a non-empty string, got \"\"; 'inputs' must be an array of"
        " objects, got 3 (one object of circuit input signals per partition; as many as the"
        " kind's partitions); 'request_id' is 300 characters; at most 256 are allowed;"
        " 'priority' must be one of critical, high, normal, low, got \"urgent\" (how urgent the"
        " job is; defaults to the proof kind's configured priority); 'deadline' \"soon\" is not"
        " an RFC 3339 time such as '2026-12-01T16:30:00Z'")


@pytest.mark.parametrize("field", ["request_id", "priority", "deadline"])
def test_null_is_not_an_absent_field(field: str) -> None:
    """The document says each is a string when present; null is refused, never taken as
    absent (the hand-written check let null through for request_id and priority)."""
    message = refusal({**OK, field: None})
    assert message.startswith(f"'{field}' must be ") and "got null" in message, message


def test_a_control_character_in_request_id_is_refused_naming_it() -> None:
    assert refusal({**OK, "request_id": "a\nb"}) == (
        "'request_id' \"a\\nb\" holds a character that is not printable (a control character)")
    assert SUBMIT.validate({**OK, "request_id": "r" * MAX_REQUEST_ID_CHARS})


def test_a_kind_that_is_not_unicode_text_is_400() -> None:
    assert refusal({"proof_kind": "\ud800", "inputs": []}) == (
        "'proof_kind' is not Unicode text: it holds a lone UTF-16 surrogate (an unpaired"
        " \\ud800-\\udfff escape)")


def test_many_unknown_fields_are_listed_briefly_and_never_reach_pydantic(monkeypatch) -> None:
    """pydantic describes every extra field (about 25 microseconds each): a 1 MB body of them
    would cost seconds. They are refused before, and the message stays short."""

    class Untouchable:
        def validate_python(self, data: Any) -> Any:
            raise AssertionError("a body with unknown fields reached pydantic")

    monkeypatch.setattr(SUBMIT, "adapter", Untouchable())
    message = refusal({**OK, **{f"x{i}": 1 for i in range(1000)}})
    assert message == (
        "unknown fields: 'x0', 'x1', 'x2', 'x3', 'x4', 'x5', 'x6', 'x7', 'x8', 'x9' and 990"
        " more (allowed: proof_kind, inputs, request_id, priority, deadline)")


def test_a_long_unknown_name_is_shortened() -> None:
    message = refusal({**OK, "n" * 10_000: 1})
    assert len(message) < 200 and "nnn...'" in message


def test_bad_partitions_are_told_by_the_first_one() -> None:
    """The inputs list fails fast: 10^5 bad items cost one error, not 10^5."""
    message = refusal({"proof_kind": "k", "inputs": [{}, *([5] * 100_000)]})
    assert message.startswith("'inputs[1]' must be an object, got 5 ("), message
    assert "more problems" not in message and "inputs[2]" not in message


def test_a_valid_body_comes_back_as_sent() -> None:
    body = {**OK, "request_id": "r-1", "priority": "low", "deadline": "2030-01-01t00:00:00z"}
    assert SUBMIT.validate(body) == body


@pytest.mark.parametrize(("query", "expected"), [
    ({}, {}), ({"wait": "2.5"}, {"wait": 2.5}), ({"wait": "0"}, {"wait": 0.0}),
    ({"other": "x"}, {}),  # other parameters are ignored, as documented
])
def test_the_proof_query(query: dict[str, str], expected: dict[str, float]) -> None:
    assert PROOF_QUERY.validate(query) == expected


# ---- no input is told in pydantic's words

_JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                 | st.text(max_size=8))
_JSON = st.recursive(_JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_FIELDS = ("proof_kind", "inputs", "request_id", "priority", "deadline")
_BODIES = st.dictionaries(st.sampled_from(_FIELDS) | st.text(max_size=6), _JSON, max_size=6)
_PYDANTIC = re.compile(r"Input should|pydantic|errors\.|type=|\[type|Field required|"
                       r"Extra inputs|Value error|dict_type|string_type|validation error")


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(body=_BODIES | _JSON)
def test_every_refusal_names_a_field_in_the_projects_words(body: Any) -> None:
    try:
        SUBMIT.validate(body)
    except RequestInvalid as e:
        message = str(e)
    else:
        return
    assert message and not _PYDANTIC.search(message), message
    if isinstance(body, dict):
        names = {json.dumps(k)[1:-1][:37] for k in body} | set(_FIELDS)
        assert any(f"{q}{n}" in message for n in names for q in "'\""), message
    else:
        assert message.startswith("request body must be a JSON object, got "), message


def test_an_oversize_number_is_told_by_its_digits() -> None:
    body = json.loads('{"proof_kind": ' + "7" * 5000 + ', "inputs": []}',
                      parse_int=parse_json_int)
    assert refusal(body) == "'proof_kind' must be a non-empty string, got a number of 5000 digits"
