#!/usr/bin/env bash
# The device check: ONE command on a fresh GPU machine. No network, nothing compiled there.
#   bash benchmarks/gpu_check.sh [OUT_DIR]            (default: $OUT, else benchmarks/out)
#
# Prepare on the CPU machine first (docs/gpu-check.md):
#   python scripts/build_gpu_kernels.py   -> build/gpu-kernels  (PTX + sm_90 cubins + manifest)
#   bash benchmarks/gpu_wheels.sh         -> .whl               (wheels the image lacks)
# and carry both. Here: the wheels are installed from .whl only (into a target directory on
# PYTHONPATH, beside the image's numba/CuPy), the kernel bundle is verified against this tree, and
# benchmarks/gpu_check.py runs the device tests (CUZK_REQUIRE_GPU=1: no skips), NTT and MSM
# 2^16..2^22, one proof per bundled kind on CUDA vs CPU, and the engine with 1 and 2 workers per
# device. It writes OUT_DIR/gpu_check.json, prints a table, and exits non-zero on any problem.
# Environment: PYTHON (the image's python3), GPU_CHECK_TIMEOUT (seconds for gpu_check.py, 420),
# GPU_CHECK_ARGS (extra arguments for gpu_check.py), GPU_CHECK_WHEELS (default .whl),
# GPU_CHECK_SITE (where the wheels go),
# GPU_CHECK_SETUP_ONLY=1 (stop after the import check: what the CPU tests run).
set -uo pipefail
cd "$(dirname "$0")/.."
t_start=$(date +%s)
OUT_DIR="${1:-${OUT:-benchmarks/out}}"
mkdir -p "$OUT_DIR"
PYTHON="${PYTHON:-python3}"
export CUZK_REQUIRE_GPU=1
export CUZK_GPU_KERNELS="${CUZK_GPU_KERNELS:-$PWD/build/gpu-kernels}"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset NUMBA_ENABLE_CUDASIM
fail() { echo "gpu_check: $*" | tee -a "$OUT_DIR/gpu_check.log"; exit 1; }

[[ -f "$CUZK_GPU_KERNELS/manifest.json" ]] \
  || fail "no kernel bundle at $CUZK_GPU_KERNELS (build it with scripts/build_gpu_kernels.py and carry it)"
# The carried wheels go into a target directory on PYTHONPATH, beside the image's own packages
# (CuPy, numba-cuda, numpy). Not a venv: the image's python3 is itself a venv, and a venv made
# from it does not see what that venv holds ("No module named 'cupy'"). --upgrade replaces a
# package folder a previous run left (pip's --target skips existing folders otherwise).
site="${GPU_CHECK_SITE:-/tmp/cuzk-gpu-site}"
wheels="${GPU_CHECK_WHEELS:-.whl}"
if compgen -G "$wheels/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --upgrade --no-cache-dir --target "$site" \
    "$wheels"/*.whl > "$OUT_DIR/pip.log" 2>&1 \
    || { cat "$OUT_DIR/pip.log"; fail "installing the carried wheels into $site failed"; }
fi
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
{ nvidia-smi || true; } > "$OUT_DIR/nvidia-smi.txt" 2>&1
# 1. Every module the check imports, from the image and the carried wheels.
"$PYTHON" - > "$OUT_DIR/toolchain.txt" 2>&1 <<'PY' || fail "import check failed: $(cat "$OUT_DIR/toolchain.txt")"
import importlib
mods = ["cupy", "numba", "numpy", "py_arkworks_bls12381", "wasmtime", "opentelemetry.sdk",
        "prometheus_client", "rich", "pydantic", "cuzk.engine.engine", "cuzk.prover.cuda_backend"]
for m in mods:
    mod = importlib.import_module(m)
    print("import", m, getattr(mod, "__version__", ""), getattr(mod, "__file__", ""))
from cuzk.prover import native_msm
print("native msm", native_msm.available())
PY
[[ "${GPU_CHECK_SETUP_ONLY:-0}" == 1 ]] && { echo "gpu_check: set-up checked (imports)"; exit 0; }
# 2. The kernel bundle, verified against this tree, and the device.
"$PYTHON" - >> "$OUT_DIR/toolchain.txt" 2>&1 <<'PY' || fail "toolchain check failed: $(cat "$OUT_DIR/toolchain.txt")"
import cupy, numba
from kernels.gpu.aot import configured_bundle
b = configured_bundle()
print("cupy", cupy.__version__, "numba", numba.__version__)
print("devices", cupy.cuda.runtime.getDeviceCount(), "driver", cupy.cuda.runtime.driverGetVersion())
print("kernels", b.path, b.manifest["source_sha256"], b.manifest["toolchain"])
print("cxx kernels", b.manifest["cxx"]["source_sha256"], list(b.manifest["cxx"]["variants"]))
PY
echo "setup: $(( $(date +%s) - t_start ))s"
# shellcheck disable=SC2086
timeout "${GPU_CHECK_TIMEOUT:-420}" "$PYTHON" benchmarks/gpu_check.py --out "$OUT_DIR" \
  ${GPU_CHECK_ARGS:-} 2>&1 | tee "$OUT_DIR/gpu_check.log"
status=${PIPESTATUS[0]}
[[ $status -eq 124 ]] && echo "gpu_check: timed out after ${GPU_CHECK_TIMEOUT:-420}s (partial JSON kept)"
echo "gpu_check: results in $OUT_DIR (status $status, $(( $(date +%s) - t_start ))s in all)"
exit "$status"
