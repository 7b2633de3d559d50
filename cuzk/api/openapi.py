"""The OpenAPI 3.1 description of the HTTP API, written by hand so it documents the contract
(including every error) rather than whatever a generator infers; a test checks it covers
every route the app serves."""

from __future__ import annotations

from typing import Any

from cuzk import __version__
from cuzk.protocol import PRIORITIES

JOB_STATES = ["queued", "running", "succeeded", "failed", "cancelled"]
PARTITION_PHASES = [
    "waiting_memory", "synthesizing", "queued_gpu", "proving", "finalizing",
    "done", "failed", "cancelled",
]  # fmt: skip


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


_KIND_PARAM = {
    "name": "proof_kind",
    "in": "path",
    "required": True,
    "description": "A configured proof kind, for example porep-c2.",
    "schema": {"type": "string"},
}
_JOB_PARAM = {
    "name": "job_id",
    "in": "path",
    "required": True,
    "description": "The job id returned by POST /v1/proofs, in full.",
    "schema": {"type": "string"},
}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string", "description": "What is wrong, for a human."}},
        "additionalProperties": False,
    },
    "SubmitRequest": {
        "type": "object",
        "required": ["proof_kind", "inputs"],
        "additionalProperties": False,
        "properties": {
            "proof_kind": {"type": "string", "examples": ["porep-c2"]},
            "inputs": {
                "type": "array",
                "description": "One object of circuit input signals per partition; the count"
                " must equal the proof kind's partitions.",
                "items": {"type": "object", "additionalProperties": True},
            },
            "request_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 256,
                "description": "Idempotency key: a repeat returns the same job.",
            },
            "priority": {
                "type": "string",
                "enum": list(PRIORITIES),
                "description": "Defaults to the proof kind's configured priority.",
            },
        },
    },
    "Job": {
        "type": "object",
        "required": ["id", "proof_kind", "state"],
        "additionalProperties": True,
        "properties": {
            "id": {"type": "string"},
            "request_id": {"type": ["string", "null"]},
            "proof_kind": {"type": "string"},
            "priority": {"type": "string", "enum": list(PRIORITIES)},
            "state": {"type": "string", "enum": JOB_STATES},
            "partitions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": True,
                    "properties": {
                        "index": {"type": "integer"},
                        "phase": {"type": "string", "enum": PARTITION_PHASES},
                    },
                },
            },
            "proofs": {
                "type": ["array", "null"],
                "description": "When succeeded: per partition, the snarkjs proof.json and"
                " public.json contents.",
                "items": {"type": "object", "additionalProperties": True},
            },
            "error": {"type": ["string", "null"]},
            "timings": {"type": "object", "additionalProperties": True},
        },
    },
    "Status": {
        "type": "object",
        "description": "Engine snapshot: jobs, partitions (phase, per-phase milliseconds),"
        " workers (state, current job and partition, busy seconds), memory, resident keys,"
        " counters.",
        "additionalProperties": True,
        "properties": {
            "jobs": {"type": "array", "items": {"type": "object"}},
            "partitions": {"type": "array", "items": {"type": "object"}},
            "workers": {"type": "array", "items": {"type": "object"}},
            "memory": {"type": "object"},
            "keys": {"type": "array", "items": {"type": "object"}},
            "counters": {"type": "object"},
        },
    },
    "Circuit": {
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "proof_kind": {"type": "string"},
            "partitions": {"type": "integer", "minimum": 1},
            "priority": {"type": "string", "enum": list(PRIORITIES)},
            "resident": {"type": "boolean"},
        },
    },
    "Circuits": {
        "type": "object",
        "required": ["circuits"],
        "properties": {"circuits": {"type": "array", "items": _ref("Circuit")}},
    },
    "VerificationKey": {
        "type": "object",
        "description": "snarkjs's verification_key.json (what `snarkjs zkey export"
        " verificationkey` writes, vk_alphabeta_12 included), for `snarkjs groth16 verify`.",
        "required": [
            "protocol",
            "curve",
            "nPublic",
            "vk_alpha_1",
            "vk_beta_2",
            "vk_gamma_2",
            "vk_delta_2",
            "vk_alphabeta_12",
            "IC",
        ],
        "additionalProperties": True,
        "properties": {
            "protocol": {"const": "groth16"},
            "curve": {"type": "string", "examples": ["bls12381"]},
            "nPublic": {"type": "integer", "minimum": 0},
        },
    },
    "WorkersPaused": {
        "type": "object",
        "required": ["workers_paused"],
        "properties": {"workers_paused": {"type": "boolean"}},
    },
    "Health": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"type": "string"}, "version": {"type": "string"}},
    },
}

_BAD_REQUEST = _error(
    "Bad request: malformed JSON, body not an object, missing or unknown fields, a field of"
    " the wrong type, or the wrong number of partition inputs."
)


def openapi_schema() -> dict[str, Any]:
    """The schema served at /openapi.json."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cuzk",
            "version": __version__,
            "description": "A persistent GPU-resident Groth16 proving engine. Every error is a"
            ' JSON object {"error": "..."} that says what is wrong.',
        },
        "paths": {
            "/v1/proofs": {
                "post": {
                    "operationId": "submitProof",
                    "summary": "Submit a proof job (idempotent on request_id)",
                    "description": "A W3C traceparent header makes the job's span its child.",
                    "parameters": [
                        {
                            "name": "traceparent",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string"},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("SubmitRequest")}},
                    },
                    "responses": {
                        "202": _json(
                            _ref("Job"),
                            "Accepted; the job (the same one for a"
                            " repeated request_id). Location points at it.",
                        ),
                        "400": _BAD_REQUEST,
                        "404": _error("Unknown proof kind."),
                        "413": _error("Body larger than server.max_body_bytes."),
                        "422": _error("Inputs that fail witness generation."),
                        "507": _error("A partition needs more memory than the whole budget."),
                    },
                }
            },
            "/v1/proofs/{job_id}": {
                "parameters": [_JOB_PARAM],
                "get": {
                    "operationId": "getProof",
                    "summary": "A job's state and, once succeeded, its proofs",
                    "parameters": [
                        {
                            "name": "wait",
                            "in": "query",
                            "required": False,
                            "description": "Long-poll: wait up to this many seconds (0-300)"
                            " for the job to finish.",
                            "schema": {"type": "number", "minimum": 0, "maximum": 300},
                        }
                    ],
                    "responses": {
                        "200": _json(_ref("Job"), "The job."),
                        "400": _error("Bad wait value."),
                        "404": _error("Unknown job id."),
                    },
                },
                "delete": {
                    "operationId": "cancelProof",
                    "summary": "Cancel a job (queued partitions dropped, running ones stop at"
                    " the next step)",
                    "responses": {
                        "200": _json(_ref("Job"), "The job after cancellation."),
                        "404": _error("Unknown job id."),
                    },
                },
            },
            "/v1/status": {
                "get": {
                    "operationId": "getStatus",
                    "summary": "Engine snapshot",
                    "responses": {"200": _json(_ref("Status"), "The snapshot.")},
                }
            },
            "/v1/circuits": {
                "get": {
                    "operationId": "listCircuits",
                    "summary": "Configured proof kinds with sizes, partitions, priority and"
                    " key residency",
                    "responses": {"200": _json(_ref("Circuits"), "The proof kinds.")},
                }
            },
            "/v1/circuits/{proof_kind}/verification_key": {
                "parameters": [_KIND_PARAM],
                "get": {
                    "operationId": "getVerificationKey",
                    "summary": "The verification key of the proving key the server proves"
                    " this kind with",
                    "responses": {
                        "200": _json(_ref("VerificationKey"), "snarkjs verification_key.json."),
                        "404": _error("Unknown proof kind."),
                        "500": _error(
                            "The kind's proving key is corrupt or for another circuit"
                            " (the body names the file and the section)."
                        ),
                    },
                },
            },
            "/v1/circuits/{proof_kind}/sample_input": {
                "parameters": [_KIND_PARAM],
                "get": {
                    "operationId": "getSampleInput",
                    "summary": "The kind's example input for one partition (sample_input)",
                    "responses": {
                        "200": _json({"type": "object"}, "Input signals for one partition."),
                        "404": _error("Unknown proof kind, or it has no sample input."),
                    },
                },
            },
            "/v1/keys/{proof_kind}/preload": {
                "parameters": [_KIND_PARAM],
                "post": {
                    "operationId": "preloadKey",
                    "summary": "Load (generating on first use) a proof kind's proving key",
                    "responses": {
                        "200": _json(_ref("Circuit"), "The proof kind, key resident."),
                        "404": _error("Unknown proof kind."),
                        "500": _error(
                            "The kind's proving key is corrupt or for another circuit"
                            " (the body names the file and the section)."
                        ),
                    },
                },
            },
            "/v1/keys/{proof_kind}": {
                "parameters": [_KIND_PARAM],
                "delete": {
                    "operationId": "evictKey",
                    "summary": "Evict a proof kind's resident proving key",
                    "responses": {
                        "200": _json(_ref("Circuit"), "The proof kind."),
                        "404": _error("Unknown proof kind."),
                    },
                },
            },
            "/v1/workers/pause": {
                "post": {
                    "operationId": "pauseWorkers",
                    "summary": "Stop GPU workers taking new partitions",
                    "responses": {"200": _json(_ref("WorkersPaused"), "Paused.")},
                }
            },
            "/v1/workers/resume": {
                "post": {
                    "operationId": "resumeWorkers",
                    "summary": "Let GPU workers take partitions again",
                    "responses": {"200": _json(_ref("WorkersPaused"), "Resumed.")},
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "summary": "Prometheus metrics; OpenMetrics (with exemplars) when the"
                    " Accept header asks for application/openmetrics-text",
                    "responses": {
                        "200": {
                            "description": "The exposition.",
                            "content": {
                                "text/plain": {"schema": {"type": "string"}},
                                "application/openmetrics-text": {"schema": {"type": "string"}},
                            },
                        },
                        "404": _error("Metrics disabled in the configuration."),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "healthz",
                    "summary": "Liveness: the process answers",
                    "responses": {"200": _json(_ref("Health"), "Alive.")},
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "summary": "Readiness: the engine is started and accepting jobs",
                    "responses": {
                        "200": _json(_ref("Health"), "Ready."),
                        "503": _json(_ref("Health"), "Not ready."),
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This schema",
                    "responses": {
                        "200": {
                            "description": "OpenAPI 3.1",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
        "components": {"schemas": _SCHEMAS},
    }
