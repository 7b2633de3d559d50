"""The documented cuzk/default_config.toml is generated from the one declaration of every key."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from cuzk.config import DEFAULT_CONFIG_PATH, PROOF_KIND_SCHEMA, SCHEMA, dump_defaults
from cuzk.settings_schema import REQUIRED


def test_committed_file_is_the_generated_one() -> None:
    committed = DEFAULT_CONFIG_PATH.read_text()
    assert committed == dump_defaults(), (
        "cuzk/default_config.toml is stale: run "
        "`python -m cuzk.config --dump-defaults --write cuzk/default_config.toml`"
    )


def test_every_key_is_in_the_file_with_its_declared_default_and_description() -> None:
    text = DEFAULT_CONFIG_PATH.read_text()
    doc = tomllib.loads(text)
    for section, keys in SCHEMA.items():
        for key, spec in keys.items():
            assert spec.doc.strip(), f"{section}.{key} has no description"
            assert spec.doc.split()[0] in text
            if spec.env_fallback:
                assert f"# {key} = " in text  # shown, but not pinned
                assert key not in doc[section]
            else:
                assert doc[section][key] == spec.default, f"{section}.{key}"
    for key, spec in PROOF_KIND_SCHEMA.items():
        shown = spec.example if spec.default is REQUIRED else spec.default
        assert spec.doc.strip()
        assert f"# {key} = " in text and shown is not None


def test_dump_defaults_command_prints_the_file() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cuzk.config", "--dump-defaults"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert out.stdout == DEFAULT_CONFIG_PATH.read_text()


def test_importing_config_does_not_import_the_engine_or_heavy_modules() -> None:
    code = (
        "import sys, cuzk.config\n"
        "heavy = [m for m in ('cuzk.engine', 'numba', 'numpy', 'cuzk.prover', 'prometheus_client')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
