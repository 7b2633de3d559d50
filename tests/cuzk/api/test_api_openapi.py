"""The OpenAPI document is generated from cuzk.protocol (and its requests from
cuzk.protocol_requests), and the names are spelled once."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from starlette.testclient import TestClient

from cuzk.api.openapi import OPERATIONS, Operation, Reply, openapi_schema
from cuzk.api.validation import PROOF_QUERY, SUBMIT
from cuzk.protocol import JOB_STATES, PARTITION_PHASES, PRIORITIES, WORKER_STATES, JobInfo
from cuzk.protocol_requests import MAX_REQUEST_ID_CHARS, MAX_WAIT_SECONDS
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import wait_until

PACKAGE = Path(__file__).resolve().parents[3] / "cuzk"
DOCUMENT = functools.cache(openapi_schema)  # generated once for the tests that only read it


def test_document_enums_are_the_protocol_names():
    schemas = DOCUMENT()["components"]["schemas"]
    assert schemas["PartitionInfo"]["properties"]["phase"]["enum"] == list(PARTITION_PHASES)
    assert schemas["JobInfo"]["properties"]["state"]["enum"] == list(JOB_STATES)
    assert schemas["JobInfo"]["properties"]["priority"]["enum"] == list(PRIORITIES)
    assert schemas["WorkerInfo"]["properties"]["state"]["enum"] == list(WORKER_STATES)
    # Closed shapes: a field the protocol does not declare is a schema violation.
    assert schemas["StatusInfo"]["additionalProperties"] is False


def test_a_route_is_one_entry():
    extra = Operation("get", "/v1/example", "example", "An example",
                      replies={200: Reply("A job.", JobInfo)})
    doc = openapi_schema([*OPERATIONS, extra])
    op = doc["paths"]["/v1/example"]["get"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobInfo"}
    assert "500" in op["responses"]  # every route documents its server fault


def test_busy_engine_answers_match_the_document(client: TestClient, prover: ScriptedProver):
    """Status with a worker mid-lease, a memory waiter and queued partitions; every answer is
    checked against the document by the client fixture."""
    gate = prover.hold("gpu")
    first = client.post("/v1/proofs", json={"proof_kind": "porep-c2",
                                            "inputs": [{"tag": str(i)} for i in range(3)]})
    assert first.status_code == 202
    assert gate.wait_entered()
    assert client.get("/v1/status").status_code == 200
    client.post("/v1/workers/pause")
    client.post("/v1/keys/winning-post/preload")
    assert client.get("/v1/circuits").status_code == 200
    client.delete("/v1/keys/winning-post")
    client.post("/v1/workers/resume")
    gate.release()
    job = client.get(f"/v1/proofs/{first.json()['id']}", params={"wait": 5}).json()
    assert job["state"] == "succeeded" and len(job["proofs"]) == 3
    assert wait_until(lambda: client.get("/v1/status").json()["jobs"][0]["state"] == "succeeded")
    assert client.get("/no/such/route").status_code == 404


def _literal_strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)
                and isinstance(e.value, str)}
    return set()


def test_phase_state_and_priority_names_are_listed_once():
    """Only cuzk/protocol.py lists them; everyone else imports the lists."""
    families = {"phases": set(PARTITION_PHASES), "job states": set(JOB_STATES),
                "priorities": set(PRIORITIES)}
    found: list[tuple[str, str, int]] = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "protocol.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = _literal_strings(node)
            for family, members in families.items():
                if len(names & members) >= 3:
                    found.append((family, str(path.relative_to(PACKAGE)), node.lineno))
    assert found == [], found


def test_request_schemas_are_the_shapes_requests_are_validated_with():
    """The submit body and the long-poll query are documented from the pydantic shapes the API
    validates with, constraints included: what is refused is what the document forbids."""
    doc = DOCUMENT()
    submit = doc["components"]["schemas"]["SubmitRequest"]
    assert submit == SUBMIT.schema
    assert submit["properties"]["request_id"]["maxLength"] == MAX_REQUEST_ID_CHARS
    assert submit["properties"]["proof_kind"]["minLength"] == 1
    assert submit["properties"]["deadline"]["format"] == "date-time"
    wait = next(p for p in doc["paths"]["/v1/proofs/{job_id}"]["get"]["parameters"]
                if p["name"] == "wait")
    field = PROOF_QUERY.schema["properties"]["wait"]
    assert wait == {"name": "wait", "in": "query", "required": False,
                    "description": field["description"],
                    "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS}}
