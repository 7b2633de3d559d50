"""Development keys come with their verification key beside them; a cache that cannot be
written (a read-only mount of pre-made keys) still serves its keys."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cuzk.prover import keystore
from cuzk.prover.keys import read_verification_key
from tests.cuzk.prover.test_prover_keycheck import R1CS


def test_a_generated_key_has_its_vk_beside_it(tmp_path: Path):
    zkey = keystore.ensure_zkey("tiny", R1CS, tmp_path)
    vk = json.loads(keystore.vk_path_for(zkey).read_text())
    assert zkey.name.startswith("tiny-") and keystore.vk_path_for(zkey).name.endswith(".vk.json")
    assert vk == read_verification_key(zkey).to_json()


def test_a_cached_key_without_vk_gets_one(tmp_path: Path):
    zkey = keystore.ensure_zkey("tiny", R1CS, tmp_path)
    keystore.vk_path_for(zkey).unlink()
    before = zkey.stat().st_mtime_ns
    assert keystore.ensure_zkey("tiny", R1CS, tmp_path) == zkey
    assert keystore.vk_path_for(zkey).is_file()
    assert zkey.stat().st_mtime_ns == before  # the key itself was not remade


def test_an_unwritable_cache_still_serves_its_key(tmp_path: Path, monkeypatch, caplog):
    zkey = keystore.ensure_zkey("tiny", R1CS, tmp_path / "made")
    cache = tmp_path / "readonly"
    cache.mkdir()
    shutil.copy(zkey, cache / zkey.name)  # no vk beside it

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(keystore, "write_verification_key", refuse)
    assert keystore.ensure_zkey("tiny", R1CS, cache) == cache / zkey.name
    assert "cannot write the verification key" in caplog.text
