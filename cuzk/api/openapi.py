"""The OpenAPI 3.1 document of the HTTP API, generated from the wire protocol.

Every body shape comes from ``cuzk.protocol`` (its TypedDicts, turned into JSON Schema by
pydantic), so the document cannot drift from what the server sends; the request body and the
query parameters come from ``cuzk.protocol_requests``, the shapes the server validates requests
with, so it cannot drift from what the server accepts either. What is written here is only what
a shape cannot say: each route's summary, parameters and the meaning of each status.
A route is one ``Operation`` in ``OPERATIONS``; adding a route (or a status to every route)
is adding an entry (or mapping over the list) before ``openapi_schema`` renders it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from cuzk import __version__
from cuzk.protocol import (
    DEADLINE_REJECTED_STATUS,
    WITNESS_MEDIA_TYPE,
    WITNESS_SUBMIT_PATH,
    CircuitList,
    DeadlineRejection,
    Error,
    Health,
    JobInfo,
    KeyEvictInfo,
    KeyPreloadInfo,
    Readiness,
    SampleInput,
    ServerFault,
    StatusInfo,
    VerificationKey,
    WorkersPausedInfo,
)
from cuzk.protocol_requests import ProofQuery, SubmitRequest, WitnessSubmitQuery

REF_TEMPLATE = "#/components/schemas/{model}"
SUBMIT_UNAVAILABLE = Error | DeadlineRejection
"""A submit's 503: draining / journal (Error), or a deadline that cannot be met."""


@dataclass(frozen=True)
class Reply:
    """One status of one route: what it means, and the protocol shape of its JSON body
    (``content`` instead for a body that is not JSON)."""

    description: str
    shape: Any = Error
    content: Mapping[str, Any] | None = None
    headers: Mapping[str, Any] | None = None  # OpenAPI header objects by name


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    operation_id: str
    summary: str
    replies: Mapping[int, Reply]
    request: Any = None  # the protocol shape of the JSON request body
    parameters: tuple[Mapping[str, Any], ...] = ()
    description: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # more OpenAPI operation fields


def param(name: str, where: str, description: str, schema: Mapping[str, Any],
          required: bool = True) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "description": description,
            "schema": dict(schema)}


def query_params(shape: Any) -> tuple[dict[str, Any], ...]:
    """The query parameters of a protocol query shape: each field's schema and description,
    from the shape the API validates the query with."""
    schema = TypeAdapter(shape).json_schema()
    required = set(schema.get("required", ()))
    out = []
    for name, field_schema in schema["properties"].items():
        spec = {k: v for k, v in field_schema.items() if k not in ("title", "description")}
        out.append(param(name, "query", field_schema.get("description", ""), spec,
                         required=name in required))
    return tuple(out)


KIND = param("proof_kind", "path", "A configured proof kind, for example porep-c2.",
             {"type": "string"})
JOB = param("job_id", "path", "The job id returned by POST /v1/proofs, in full.",
            {"type": "string"})
BAD_REQUEST = Reply(
    "Bad request: malformed JSON, body not an object, missing or unknown fields, a field of"
    " the wrong type, or the wrong number of partition inputs.")
UNKNOWN_KIND = Reply("Unknown proof kind.")
BROKEN_KEY = Reply("The kind's proving key is corrupt or for another circuit (the body names"
                   " the file and the section).", ServerFault)
TEXT = {"schema": {"type": "string"}}
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                               "schema": {"type": "string", "pattern": "^[0-9]+$"}}}
SERVER_FAULT = Reply("Server fault: a bug or an unreadable file; the body says what (never the"
                     " answer to bad input).", ServerFault)

def _retention() -> str:
    """The retention rule with its defaults, read from the one place they are declared."""
    from cuzk.config import JournalConfig, keys_of

    keys = keys_of(JournalConfig)
    jobs, seconds = keys["retention_jobs"].default, keys["retention_s"].default
    return (
        "Jobs are journaled when accepted and survive restarts (same id, same proofs). A"
        " finished job is served until it is beyond the newest journal.retention_jobs finished"
        f" jobs (default {jobs}) or older than journal.retention_s seconds (default {seconds},"
        f" {int(seconds) // 86400} days); the idempotency of its request_id ends with it. While"
        " the server drains for shutdown, a long-poll is answered with the job's state as it"
        " is then."
    )


OPERATIONS: list[Operation] = [
    Operation(
        "post", "/v1/proofs", "submitProof", "Submit a proof job (idempotent on request_id)",
        description="A W3C traceparent header makes the job's span its child.",
        request=SubmitRequest,
        parameters=(param("traceparent", "header", "W3C trace context of the caller.",
                          {"type": "string"}, required=False),),
        replies={
            202: Reply("Accepted; the job (the same one for a repeated request_id). Location"
                       " points at it.", JobInfo),
            400: BAD_REQUEST,
            404: UNKNOWN_KIND,
            409: Reply("The request_id names a job submitted with a different body (another"
                       " proof kind, priority or inputs); nothing changes; Location points at"
                       " that job."),
            413: Reply("Body larger than the proof kind's inputs can need (known from its"
                       " circuit), than the largest configured kind's (refused while it is"
                       " read), or than server.max_body_bytes; or one whose parsing needs more"
                       " than the whole request parse reserve"
                       " (engine.request_parse_reserve_bytes)."),
            422: Reply("Inputs that fail witness generation."),
            DEADLINE_REJECTED_STATUS: Reply(
                "Draining for shutdown, the journal cannot be written, or the request parse"
                " reserve (apart from the proving memory budget) has no room to parse the"
                " body now: retry after Retry-After seconds."
                " Or (a DeadlineRejection body, reason \"deadline\", no Retry-After) the"
                " deadline cannot be met even at the front of the job's priority class, for a"
                " kind whose deadline_admission is reject: send the job to another prover.",
                SUBMIT_UNAVAILABLE, headers=RETRY_AFTER),
            507: Reply("A partition needs more memory than the whole budget."),
        },
    ),
    Operation(
        "post", WITNESS_SUBMIT_PATH, "submitWitnessProof",
        "Submit a proof job proven from ready witnesses (one .wtns per partition)",
        description=(
            "For witnesses made elsewhere (circom's native C++ generator, snarkjs wtns"
            " calculate): the body is the partitions' .wtns files back to back, in partition"
            " order (a .wtns file is self-delimiting). No witness generator runs on the"
            " server. Each witness is checked at submit against the kind's circuit (field,"
            " variable count, wire 0 = 1, every value below the prime); its constraints are"
            " checked when its partition is synthesized, and a witness that fails them fails"
            " the job, naming the partition. The body is streamed to disk beside the journal,"
            " never held in memory, and kept until the job settles; an accepted job survives"
            " a restart like any other. Answered like POST /v1/proofs."),
        parameters=(*query_params(WitnessSubmitQuery),
                    param("traceparent", "header", "W3C trace context of the caller.",
                          {"type": "string"}, required=False)),
        extra={"requestBody": {"required": True, "content": {WITNESS_MEDIA_TYPE: {
            "schema": {"type": "string", "contentMediaType": WITNESS_MEDIA_TYPE}}}}},
        replies={
            202: Reply("Accepted; the job (the same one for a repeated request_id). Location"
                       " points at it.", JobInfo),
            400: Reply("Bad query (missing proof_kind, unknown or repeated parameters, a bad"
                       " priority or deadline), or a witness that is not one the kind takes:"
                       " truncated or malformed .wtns, the wrong number of them, another field"
                       " (a bn128 witness), another circuit's variable count, wire 0 not 1."),
            404: UNKNOWN_KIND,
            409: Reply("The request_id names a job submitted with a different body; nothing"
                       " changes; Location points at that job."),
            413: Reply("Body larger than the kind's witnesses are (exactly its partitions x"
                       " one .wtns of its circuit's variables; the message gives the figure),"
                       " or the request parse reserve (engine.request_parse_reserve_bytes) is"
                       " smaller than checking a witness needs (16 MiB)."),
            415: Reply("Content-Type is not application/octet-stream."),
            501: Reply("This server cannot prove from witnesses (a cluster head)."),
            DEADLINE_REJECTED_STATUS: Reply(
                "As for POST /v1/proofs: draining, the journal or the witness directory cannot"
                " be written, the request parse reserve is busy (retry after Retry-After);"
                " or the deadline cannot be met.", SUBMIT_UNAVAILABLE, headers=RETRY_AFTER),
            507: Reply("A partition needs more memory than the whole budget."),
        },
    ),
    Operation(
        "get", "/v1/proofs/{job_id}", "getProof", "A job's state and, once succeeded, its proofs",
        description=_retention(),
        parameters=(JOB, *query_params(ProofQuery)),
        replies={200: Reply("The job.", JobInfo), 400: Reply("Bad wait value."),
                 404: Reply("Unknown job id.")},
    ),
    Operation(
        "delete", "/v1/proofs/{job_id}", "cancelProof",
        "Cancel a job (queued partitions dropped, running ones stop at the next step)",
        parameters=(JOB,),
        replies={200: Reply("The job after cancellation.", JobInfo),
                 404: Reply("Unknown job id.")},
    ),
    Operation(
        "get", "/v1/status", "getStatus",
        "Engine snapshot: workers, partitions by phase, jobs, memory, keys, counters",
        replies={200: Reply("The snapshot, computed from open leases when asked.", StatusInfo)},
    ),
    Operation(
        "get", "/v1/circuits", "listCircuits",
        "Configured proof kinds with sizes, partitions, priority and key residency",
        replies={200: Reply("The proof kinds.", CircuitList)},
    ),
    Operation(
        "get", "/v1/circuits/{proof_kind}/verification_key", "getVerificationKey",
        "The verification key of the proving key the server proves this kind with",
        parameters=(KIND,),
        replies={200: Reply("snarkjs verification_key.json.", VerificationKey),
                 404: UNKNOWN_KIND, 500: BROKEN_KEY},
    ),
    Operation(
        "get", "/v1/circuits/{proof_kind}/sample_input", "getSampleInput",
        "The kind's example input for one partition (sample_input)",
        parameters=(KIND,),
        replies={200: Reply("Input signals for one partition.", SampleInput),
                 404: Reply("Unknown proof kind, or it has no sample input."),
                 500: Reply("The sample input file is unreadable.")},
    ),
    Operation(
        "post", "/v1/keys/{proof_kind}/preload", "preloadKey",
        "Load (generating on first use) a proof kind's proving key",
        parameters=(KIND,),
        replies={200: Reply("The proof kind, key resident.", KeyPreloadInfo),
                 404: UNKNOWN_KIND, 500: BROKEN_KEY,
                 507: Reply("The key needs more memory than the whole budget.")},
    ),
    Operation(
        "delete", "/v1/keys/{proof_kind}", "evictKey", "Evict a proof kind's resident proving key",
        parameters=(KIND,),
        replies={200: Reply("The proof kind and what happened to its key.", KeyEvictInfo),
                 404: UNKNOWN_KIND},
    ),
    Operation(
        "post", "/v1/workers/pause", "pauseWorkers", "Stop GPU workers taking new partitions",
        replies={200: Reply("Paused.", WorkersPausedInfo)},
    ),
    Operation(
        "post", "/v1/workers/resume", "resumeWorkers", "Let GPU workers take partitions again",
        replies={200: Reply("Resumed.", WorkersPausedInfo)},
    ),
    Operation(
        "get", "/metrics", "metrics",
        "Prometheus metrics; OpenMetrics (with exemplars) when the Accept header asks for"
        " application/openmetrics-text",
        replies={200: Reply("The exposition.", None,
                            {"text/plain": TEXT, "application/openmetrics-text": TEXT}),
                 404: Reply("Metrics disabled in the configuration.")},
    ),
    Operation(
        "get", "/healthz", "healthz", "Liveness: the process answers",
        replies={200: Reply("Alive.", Health)},
    ),
    Operation(
        "get", "/readyz", "readyz", "Readiness: a submit now would be taken",
        replies={200: Reply("Ready.", Readiness),
                 503: Reply("Not ready: not started, draining, the journal cannot be written,"
                            " or server.max_requests_in_flight is reached (the reason says"
                            " which).", Readiness)},
    ),
    Operation(
        "get", "/openapi.json", "openapi", "This document",
        replies={200: Reply("OpenAPI 3.1", None,
                            {"application/json": {"schema": {"type": "object"}}})},
    ),
]


def _shapes(operations: Iterable[Operation]) -> list[Any]:
    out: list[Any] = []
    for op in operations:
        for shape in (op.request, *(r.shape for r in op.replies.values())):
            if shape is not None and all(shape is not s for s in out):
                out.append(shape)
    return out


def shape_schemas(shapes: Iterable[Any]) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """(id(shape) -> its schema, often a ``$ref``; the component schemas they refer to)."""
    shapes = list(shapes)
    inputs = [((i, "validation"), "validation", TypeAdapter(s)) for i, s in enumerate(shapes)]
    by_key, defs = TypeAdapter.json_schemas(inputs, ref_template=REF_TEMPLATE)  # type: ignore[arg-type]
    schemas = {id(s): by_key[((i, "validation"), "validation")] for i, s in enumerate(shapes)}
    return schemas, defs.get("$defs", {})


def _operation(op: Operation, schemas: Mapping[int, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary}
    if op.description:
        out["description"] = op.description
    if op.parameters:
        out["parameters"] = [dict(p) for p in op.parameters]
    if op.request is not None:
        out["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": schemas[id(op.request)]}}}
    responses: dict[str, Any] = {}
    for status, reply in sorted({500: SERVER_FAULT, **op.replies}.items()):
        body: dict[str, Any] = {"description": reply.description}
        if reply.headers:
            body["headers"] = {k: dict(v) for k, v in reply.headers.items()}
        if reply.content is not None:
            body["content"] = {k: dict(v) for k, v in reply.content.items()}
        elif reply.shape is not None:
            body["content"] = {"application/json": {"schema": schemas[id(reply.shape)]}}
        responses[str(status)] = body
    out["responses"] = responses
    out.update(op.extra)
    return out


def openapi_schema(operations: Iterable[Operation] = OPERATIONS) -> dict[str, Any]:
    """The document served at /openapi.json."""
    operations = list(operations)
    schemas, components = shape_schemas(_shapes(operations))
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method] = _operation(op, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cuzk",
            "version": __version__,
            "description": "A persistent GPU-resident Groth16 proving engine. Every error is a"
            ' JSON object {"error": "..."} that says what is wrong.',
        },
        "paths": paths,
        "components": {"schemas": components},
    }
