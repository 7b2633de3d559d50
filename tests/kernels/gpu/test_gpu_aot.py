"""The ahead-of-time kernel bundle without a GPU: the launch ABI packing, the hash checks that
refuse a stale or corrupt bundle, and the executor taking every kernel from the bundle (no JIT).
The real build (every kernel through NVVM and ptxas) is test_gpu_ptx.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kernels.gpu import aot, cxx_kernels
from kernels.gpu.launch import Executor
from kernels.gpu.runtime import Target, cpu_target


def test_pack_args_follows_numba_array_abi():
    a = np.zeros((8, 16), np.uint32)
    params = ["int64", ["array", "uint32", 2], "bool", "int64"]
    packed = aot.pack_args("k", params, [16, a, True, 3])
    assert [np.asarray(p).dtype.itemsize for p in packed] == aot.param_widths(params)
    # meminfo, parent, nitems, itemsize, data, shape (2), strides (2)
    assert [int(x) for x in packed[1:10]] == [0, 0, 128, 4, a.ctypes.data, 8, 16, 64, 4]
    assert packed[10].dtype == np.uint8 and packed[10] == 1
    assert packed[0].dtype == np.int64 and packed[11] == 3


@pytest.mark.parametrize("arg,msg", [
    (np.zeros((8, 16), np.uint64), "2-D uint32"),
    (np.zeros(16, np.uint32), "2-D uint32"),
    (np.zeros((16, 8), np.uint32).T, "C-contiguous"),
    (3, "2-D uint32"),
])
def test_pack_args_refuses_what_the_kernel_was_not_built_for(arg, msg):
    with pytest.raises(TypeError, match=msg):
        aot.pack_args("k", [["array", "uint32", 2]], [arg])


def test_pack_args_refuses_wrong_count_and_non_integers():
    with pytest.raises(TypeError, match="2 parameters, 1 arguments"):
        aot.pack_args("k", ["int64", "int64"], [1])
    with pytest.raises(TypeError, match="must be an integer"):
        aot.pack_args("k", ["int64"], [1.5])
    with pytest.raises(TypeError, match="must be an integer"):
        aot.pack_args("k", ["int64"], [True])


def _fake_bundle(path: Path) -> Path:
    path.mkdir()
    (path / "k.ptx").write_text(".version 9.0\n.target sm_90\n")
    (path / "k.cubin").write_bytes(b"\x7fELF fake")
    manifest = {
        "format": aot.FORMAT, "arch": "sm_90", "source_sha256": aot.source_hash(),
        "kernels": {"ntt_scale": {
            "kind": "grid", "entry": "_Z5scale", "params": ["int64"], "resources": {},
            "ptx": "k.ptx", "ptx_sha256": aot.sha256_bytes((path / "k.ptx").read_bytes()),
            "cubin": "k.cubin", "cubin_sha256": aot.sha256_bytes(b"\x7fELF fake")}},
    }
    (path / "cxx").mkdir()
    (path / "cxx" / "msm_ptx.cubin").write_bytes(b"\x7fELF cxx")
    manifest["cxx"] = {"source_sha256": cxx_kernels.source_hash(), "variants": {"ptx": {
        "cubin": "cxx/msm_ptx.cubin", "cubin_sha256": aot.sha256_bytes(b"\x7fELF cxx"),
        "resources": {}}}}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def test_cxx_kernels_are_verified_like_the_others(tmp_path, monkeypatch):
    """The C++ cubins: missing, corrupt, or built from other C++ sources is refused."""
    path = _fake_bundle(tmp_path / "b")
    (path / "cxx" / "msm_ptx.cubin").write_bytes(b"\x7fELF changed")
    with pytest.raises(aot.KernelBundleError, match=r"C\+\+ kernels \(ptx\).*SHA-256"):
        aot.load_bundle(path)
    (path / "cxx" / "msm_ptx.cubin").unlink()
    with pytest.raises(aot.KernelBundleError, match="missing"):
        aot.load_bundle(path)
    path = _fake_bundle(tmp_path / "c")
    monkeypatch.setattr(cxx_kernels, "source_hash", lambda: "0" * 64)   # sources edited
    with pytest.raises(aot.KernelBundleError, match=r"C\+\+ kernels were built from other"):
        aot.load_bundle(path)
    manifest = json.loads((path / "manifest.json").read_text())
    del manifest["cxx"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(aot.KernelBundleError, match=r"has no C\+\+ kernels"):
        aot.load_bundle(path)


def test_bundle_loads_when_hashes_match(tmp_path):
    b = aot.load_bundle(_fake_bundle(tmp_path / "b"))
    assert b.entries["ntt_scale"].entry == "_Z5scale"


def test_corrupt_file_is_refused(tmp_path):
    path = _fake_bundle(tmp_path / "b")
    (path / "k.cubin").write_bytes(b"\x7fELF changed")
    with pytest.raises(aot.KernelBundleError, match=r"k\.cubin has SHA-256"):
        aot.load_bundle(path)


def test_missing_file_and_manifest_are_refused(tmp_path):
    path = _fake_bundle(tmp_path / "b")
    (path / "k.ptx").unlink()
    with pytest.raises(aot.KernelBundleError, match="missing"):
        aot.load_bundle(path)
    with pytest.raises(aot.KernelBundleError, match="build_gpu_kernels"):
        aot.load_bundle(tmp_path / "nowhere")


def test_bundle_built_from_other_sources_is_refused(tmp_path):
    """A kernel source edited after the build makes the bundle stale: refused, not launched."""
    root = tmp_path / "tree"
    for rel in aot.SOURCES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(aot.ROOT / rel, root / rel)
    path = _fake_bundle(tmp_path / "b")
    aot.load_bundle(path, root=root)
    with open(root / "kernels/gpu/ntt.py", "a") as f:
        f.write("\n# edited\n")
    with pytest.raises(aot.KernelBundleError, match="other kernel sources"):
        aot.load_bundle(path, root=root)


def test_configured_bundle_follows_the_environment(tmp_path, monkeypatch):
    aot.configured_bundle.cache_clear()
    monkeypatch.delenv(aot.ENV, raising=False)
    assert aot.configured_bundle() is None
    monkeypatch.setenv(aot.ENV, str(tmp_path / "absent"))
    aot.configured_bundle.cache_clear()
    with pytest.raises(aot.KernelBundleError):
        aot.configured_bundle()
    aot.configured_bundle.cache_clear()


class _RecordingBundle:
    """Stands in for a loaded bundle: records which body each launch asked for."""

    def __init__(self):
        self.launches = []

    def kernel(self, body):
        bundle = self

        class K:
            def __getitem__(self, cfg):
                return lambda *args: bundle.launches.append((body, cfg, args))

        return K()


def test_executor_takes_every_kernel_from_the_bundle():
    """On the CUDA target with a bundle, launches go to the bundle with the CuPy stream, and the
    arrays are handed over untouched (the bundle packs them): numba compiles nothing."""
    cpu = cpu_target()
    cuda_like = Target("cuda", cpu.jit, cpu.dev, cpu.fr, cpu.fq)
    rec = _RecordingBundle()
    stream = object()
    ex = Executor(cuda_like, np, stream=stream, kernels=rec)
    a = np.zeros((8, 4), np.uint32)
    ex.grid("body", 300, a, 7)
    ex.phases("phase_body", 4, 512, 3, a)
    assert rec.launches[0] == ("body", (3, 128, stream), (300, a, 7))
    assert rec.launches[1] == ("phase_body", (4, 256, stream), (3, a))
    assert Executor(cpu, np, kernels=rec).kernels is None     # the CPU target never uses it


def test_bundle_maps_every_body_to_its_kernel_name():
    pytest.importorskip("numba.cuda")
    from kernels.gpu.ptx import kernel_specs

    specs = kernel_specs()
    b = aot.KernelBundle(Path("/nonexistent"), {"kernels": {s.name: {
        "kind": s.kind, "entry": "e", "params": [], "ptx": "x", "resources": {}} for s in specs}})
    for s in specs:
        assert b.name_for(s.body) == s.name
    with pytest.raises(aot.KernelBundleError, match="no ahead-of-time kernel"):
        b.name_for(object())
