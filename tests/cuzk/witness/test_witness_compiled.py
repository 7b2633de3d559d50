"""Witness generators compiled in a child process and mapped per computation (issue 27): the
server holds no compiler memory and nothing of a generator between computations."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.errors import FormatError, WitnessError
from cuzk.witness import compiled, wasm
from cuzk.witness.wasm import WitnessCalculator

KIND = bundled_circuits()["winning-post"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("witness-cache")


@pytest.fixture(scope="module")
def sample() -> dict:
    return json.loads(KIND.sample_input_path.read_text())


@pytest.fixture(scope="module")
def reference(sample: dict):
    return WitnessCalculator(KIND.wasm_path).calculate(sample)


def _stores_made(monkeypatch: pytest.MonkeyPatch) -> list[weakref.ref]:
    made: list[weakref.ref] = []
    real = wasm._Runner.__init__

    def tracking(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        real(self, *args, **kwargs)
        made.append(weakref.ref(self.store))

    monkeypatch.setattr(wasm._Runner, "__init__", tracking)
    return made


def test_a_cached_generator_computes_the_same_witness(cache: Path, sample: dict, reference) -> None:
    calc = WitnessCalculator(KIND.wasm_path, cache_dir=cache)
    assert (calc.calculate(sample) == reference).all()
    files = sorted(cache.glob(f"*{compiled.SUFFIX}"))
    assert len(files) == 2  # the generator and the witness-copy helper
    assert calc.code_bytes == sum(f.stat().st_size for f in files)
    assert calc.instance_bytes >= 2 * wasm._PAGE


def test_a_second_generator_of_the_same_wasm_compiles_nothing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    WitnessCalculator(KIND.wasm_path, cache_dir=cache)
    monkeypatch.setattr(compiled, "_compile_in_child", _never)
    WitnessCalculator(KIND.wasm_path, cache_dir=cache)


def _never(*args: object) -> None:
    raise AssertionError("compiled again")


def test_no_instance_outlives_its_computation(
    cache: Path, sample: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wasmtime keeps host functions in a module-level table until their store is freed; a
    bound method there held its runner and store for ever, so every instance ever made (one per
    failed computation, or per generator) stayed resident."""
    made = _stores_made(monkeypatch)
    calc = WitnessCalculator(KIND.wasm_path, cache_dir=cache)
    calc.calculate(sample)
    bad = dict(sample, leaf=[[str(int(sample["leaf"][0][0]) + 1)]])
    with pytest.raises(WitnessError):
        calc.calculate(bad)
    del calc
    gc.collect()
    assert len(made) == 3  # the probe, the witness, the failure
    assert [r() for r in made] == [None, None, None]


def test_a_damaged_cache_file_is_compiled_again(tmp_path: Path, sample: dict, reference) -> None:
    calc = WitnessCalculator(KIND.wasm_path, cache_dir=tmp_path)
    for f in tmp_path.glob(f"*{compiled.SUFFIX}"):
        f.write_bytes(b"not a compiled module")
    assert (calc.calculate(sample) == reference).all()


def test_not_a_wasm_is_a_format_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.wasm"
    bad.write_bytes(b"\0asm garbage")
    with pytest.raises(FormatError, match="not a valid wasm module") as e:
        WitnessCalculator(bad, cache_dir=tmp_path / "cache")
    assert str(bad) in str(e.value)
    assert not list((tmp_path / "cache").glob("*"))  # nothing half-written stays


def test_an_unwritable_cache_falls_back_to_a_private_directory(
    tmp_path: Path, sample: dict, reference, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compiled, "_fallback", None)
    blocked = tmp_path / "file"
    blocked.write_text("a file, not a directory")
    calc = WitnessCalculator(KIND.wasm_path, cache_dir=blocked / "witness")
    assert (calc.calculate(sample) == reference).all()
    assert compiled._fallback is not None and list(compiled._fallback.glob("*.cwasm"))
