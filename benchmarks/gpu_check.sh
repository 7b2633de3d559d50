#!/usr/bin/env bash
# The device check: ONE command on a fresh GPU machine. No network, nothing compiled there.
#   bash benchmarks/gpu_check.sh [OUT_DIR]            (default: $OUT, else benchmarks/out)
#
# Prepare on the CPU machine first (docs/gpu-check.md):
#   python scripts/build_gpu_kernels.py   -> build/gpu-kernels  (PTX + sm_90 cubins + manifest)
#   bash benchmarks/gpu_wheels.sh         -> .whl               (wheels the image lacks)
# and carry both. Here: the wheels are installed from .whl only (into a venv that sees the image's
# numba/CuPy), the kernel bundle is verified against this tree's kernel sources, and
# benchmarks/gpu_check.py runs the device tests (CUZK_REQUIRE_GPU=1: no skips), NTT and MSM
# 2^16..2^22, one proof per bundled kind on CUDA vs CPU, and the engine with 1 and 2 workers per
# device. It writes OUT_DIR/gpu_check.json, prints a table, and exits non-zero on any problem.
# Environment: PYTHON (the image's python3), GPU_CHECK_TIMEOUT (seconds for gpu_check.py, 420),
# GPU_CHECK_ARGS (extra arguments for gpu_check.py).
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
if compgen -G ".whl/*.whl" >/dev/null; then
  venv=/tmp/cuzk-gpu-venv
  "$PYTHON" -m venv --without-pip --system-site-packages "$venv" || fail "cannot create $venv"
  "$venv/bin/python" -m pip install -q --no-index --find-links .whl --no-cache-dir \
    -r benchmarks/device_requirements.txt > "$OUT_DIR/pip.log" 2>&1 \
    || { cat "$OUT_DIR/pip.log"; fail "installing the carried wheels failed"; }
  PYTHON="$venv/bin/python"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{ nvidia-smi || true; } > "$OUT_DIR/nvidia-smi.txt" 2>&1
"$PYTHON" - > "$OUT_DIR/toolchain.txt" 2>&1 <<'PY' || fail "toolchain check failed: $(cat "$OUT_DIR/toolchain.txt")"
import cupy, numba
from kernels.gpu.aot import configured_bundle
b = configured_bundle()
print("cupy", cupy.__version__, "numba", numba.__version__)
print("devices", cupy.cuda.runtime.getDeviceCount(), "driver", cupy.cuda.runtime.driverGetVersion())
print("kernels", b.path, b.manifest["source_sha256"], b.manifest["toolchain"])
PY
echo "setup: $(( $(date +%s) - t_start ))s"
# shellcheck disable=SC2086
timeout "${GPU_CHECK_TIMEOUT:-420}" "$PYTHON" benchmarks/gpu_check.py --out "$OUT_DIR" \
  ${GPU_CHECK_ARGS:-} 2>&1 | tee "$OUT_DIR/gpu_check.log"
status=${PIPESTATUS[0]}
[[ $status -eq 124 ]] && echo "gpu_check: timed out after ${GPU_CHECK_TIMEOUT:-420}s (partial JSON kept)"
echo "gpu_check: results in $OUT_DIR (status $status, $(( $(date +%s) - t_start ))s in all)"
exit "$status"
