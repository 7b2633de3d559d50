"""The documents generated from the key declarations: the docs page's key table is current and
names every key, and the JSON Schema accepts the shipped file and refuses what the loader does."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import jsonschema
import pytest

from cuzk.config import DEFAULT_CONFIG_PATH, PROOF_KIND_SCHEMA, SCHEMA
from cuzk.config_docs import DOCS_PAGE, docs_table, json_schema, with_docs_table


def test_the_docs_table_is_current() -> None:
    page = DOCS_PAGE.read_text()
    assert page == with_docs_table(page), (
        "docs/configuration.md is stale: run "
        "`python -m cuzk.config --docs-table --write docs/configuration.md`"
    )


def test_the_docs_table_names_every_key_with_its_variable() -> None:
    table = docs_table()
    for section, keys in SCHEMA.items():
        for key in keys:
            assert f"| `{key}` |" in table and f"`CUZK_{section.upper()}_{key.upper()}`" in table
    for key in PROOF_KIND_SCHEMA:
        assert f"`CUZK_PROOF_KINDS_<NAME>_{key.upper()}`" in table
    assert "`OTEL_SERVICE_NAME`" in table  # a fallback is told


def test_the_json_schema_accepts_the_shipped_file_and_a_kind_of_ones_own() -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(tomllib.loads(DEFAULT_CONFIG_PATH.read_text()), schema)
    mine = {"proof_kinds": {"my-circuit": {"r1cs": "c.r1cs", "wasm": "c.wasm", "partitions": 2},
                            "porep-c2": {"partitions": 4}},  # a bundled kind needs no files
            "server": {"max_body_bytes": "1MiB"}, "engine": {"cuda_devices": [0, 1]}}
    jsonschema.validate(mine, schema)


@pytest.mark.parametrize("doc", [
    {"sever": {}},
    {"server": {"port": 1}},
    {"engine": {"gpu_worker_per_device": 1}},
    {"server": {"listen": 9820}},
    {"telemetry": {"tracing": 3}},
    {"proof_kinds": {"Bad_Name": {}}},
    {"proof_kinds": {"porep-c2": {"shape": "x"}}},
])
def test_the_json_schema_refuses_what_the_loader_refuses(doc: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json_schema())


def test_the_commands_print_the_documents() -> None:
    def run(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "cuzk.config", *args], capture_output=True,
                              text=True, timeout=60, check=True).stdout

    assert run("--docs-table") == docs_table()
    assert json.loads(run("--json-schema")) == json_schema()
