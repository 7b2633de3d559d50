"""The key's host size is known before the key exists, and is what the loaded key holds."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.formats.r1cs import read_r1cs
from cuzk.formats.zkey import read_zkey
from cuzk.prover import ProvingKey, native_msm
from cuzk.prover.key_layout import KeyLayout
from cuzk.prover.keys import PointSection
from cuzk.prover.keystore import ensure_zkey
from tests.conftest import KEYS_DIR

KINDS = ["winning-post", "snap-update", "window-post", "porep-c2"]


def _held_objects(key: ProvingKey) -> int:
    """The loaded key's heap, counted object by object (distinct ids), not from its layout."""
    ic = key.verification_key.ic
    arrays = (key.coef_matrix, key.coef_constraint, key.coef_signal, key.coef_value)
    sections: list[PointSection] = [key._g1[s] for s in ("A", "B1", "C", "H")] + [key._b2]

    def section(s: PointSection) -> int:
        if s.points is None:  # the native MSM reads the mapped rows in place, and its table
            return int(s.present.nbytes + s.raw.nbytes + (0 if s.table is None else
                                                          s.table.data.nbytes))
        objects = len({id(p) for p in s.points}) * sys.getsizeof(s.points[0])
        return int(s.present.nbytes + s.points.nbytes + objects)

    return (
        sum(a.nbytes for a in arrays)
        + sum(section(s) for s in sections)
        + sys.getsizeof(ic)
        + len({id(p) for p in ic}) * sys.getsizeof(ic[0])
    )


@pytest.mark.parametrize("kind", KINDS)
def test_layout_from_the_r1cs_equals_the_generated_keys(kind):
    """Before a development key exists, the r1cs gives the same layout the key will have."""
    r1cs_path = Path(bundled_circuits()[kind].r1cs_path)
    zkey = ensure_zkey(kind, r1cs_path, KEYS_DIR)
    assert KeyLayout.of_r1cs(read_r1cs(r1cs_path)) == KeyLayout.of_zkey(read_zkey(zkey))


@pytest.mark.parametrize("native", [True, False], ids=["native-msm", "arkworks-points"])
@pytest.mark.parametrize("kind", ["winning-post", "porep-c2"])
def test_host_bytes_before_loading_is_what_the_loaded_key_holds(kind, native, monkeypatch):
    """Both key shapes: mapped sections for the native MSM, arkworks objects without it."""
    if native and not native_msm.available():
        pytest.fail("the native MSM extension is not built (make native)")
    monkeypatch.setattr(native_msm, "available", lambda: native)
    zkey = ensure_zkey(kind, Path(bundled_circuits()[kind].r1cs_path), KEYS_DIR)
    before = KeyLayout.of_zkey(read_zkey(zkey, mmap=True)).host_bytes
    key = ProvingKey.load(zkey)
    gc.collect()
    assert before == key.host_bytes == _held_objects(key)
    assert before > zkey.stat().st_size  # the file's size is not the figure (issue 19)
