"""The wire protocol's requests, spelled once: what a client may send, as pydantic shapes.

Beside ``cuzk.protocol`` (the names and the answers' shapes), which clients import and which
therefore stays free of pydantic. The API validates every request body and query with these
(``cuzk.api.validation`` turns pydantic's errors into the project's messages) and the OpenAPI
document's request body and query parameters are generated from them, so what is refused and
what is documented cannot drift apart. A body is validated strictly (a JSON number is never
taken for a string, nor a string for a number) and may carry only the fields listed; a query
value is text, so it is converted (``wait=1.5``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, NotRequired

from pydantic import AfterValidator, ConfigDict, Field, with_config
from typing_extensions import TypedDict  # pydantic reads TypedDicts from here on 3.11

from cuzk.protocol import Priority

MAX_REQUEST_ID_CHARS = 256
MAX_WAIT_SECONDS = 300.0
"""Longest ``?wait=`` long-poll accepted; clients wanting longer simply poll again."""
DEADLINE_EXAMPLE = "2026-12-01T16:30:00Z"

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?P<offset>[Zz]|[+-]\d{2}:\d{2})?")


def deadline_seconds(text: str) -> float:
    """An RFC 3339 time (with its offset, or ``Z``) as Unix seconds; ValueError says what is
    wrong with it, in words that follow the value."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"is not an RFC 3339 time such as {DEADLINE_EXAMPLE!r}")
    if m.group("offset") is None:
        raise ValueError("has no UTC offset; add 'Z' or '+00:00'")
    try:
        when = datetime.fromisoformat(text.upper())
    except ValueError as e:
        raise ValueError(f"is not a valid time ({e})") from None
    return when.timestamp()


def _rfc3339(text: str) -> str:
    deadline_seconds(text)
    return text


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("holds a character that is not printable (a control character)")
    return text


@with_config(ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True))
class SubmitRequest(TypedDict):
    """``POST /v1/proofs``."""

    proof_kind: Annotated[str, Field(min_length=1)]
    """A configured proof kind (``GET /v1/circuits`` lists them), for example ``porep-c2``."""
    inputs: Annotated[list[dict[str, Any]], Field(fail_fast=True)]
    """One object of circuit input signals per partition; as many as the kind's partitions."""
    request_id: NotRequired[Annotated[
        str, Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS), AfterValidator(_printable)]]
    """Idempotency key: a repeat returns the same job (a new attempt after failure)."""
    priority: NotRequired[Priority]
    """How urgent the job is; defaults to the proof kind's configured priority."""
    deadline: NotRequired[Annotated[
        str, Field(json_schema_extra={"format": "date-time"}), AfterValidator(_rfc3339)]]
    """RFC 3339 time (``2026-12-01T16:30:00Z``) by which the proofs are needed; defaults to
    the proof kind's configured relative deadline (none for kinds without one). A time already
    passed, or further ahead than the server's ``engine.deadline_horizon``, is refused
    (400)."""


@with_config(ConfigDict(extra="forbid", use_attribute_docstrings=True))
class WitnessSubmitQuery(TypedDict):
    """The query of ``POST /v1/proofs/witness`` (``cuzk.protocol.WITNESS_SUBMIT_PATH``): the
    fields of ``SubmitRequest`` but ``inputs``, whose place the body's .wtns files take."""

    proof_kind: Annotated[str, Field(min_length=1)]
    """A configured proof kind (``GET /v1/circuits`` lists them), for example ``porep-c2``."""
    request_id: NotRequired[Annotated[
        str, Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS), AfterValidator(_printable)]]
    """Idempotency key: a repeat returns the same job (a new attempt after failure)."""
    priority: NotRequired[Priority]
    """How urgent the job is; defaults to the proof kind's configured priority."""
    deadline: NotRequired[Annotated[
        str, Field(json_schema_extra={"format": "date-time"}), AfterValidator(_rfc3339)]]
    """RFC 3339 time by which the proofs are needed, as in ``POST /v1/proofs``."""


@with_config(ConfigDict(extra="ignore", use_attribute_docstrings=True))
class ProofQuery(TypedDict):
    """The query of ``GET /v1/proofs/{job_id}`` (other parameters are ignored)."""

    wait: NotRequired[Annotated[
        float, Field(ge=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)]]
    """Long-poll: wait up to this many seconds for the job to finish."""
