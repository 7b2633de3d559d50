#!/usr/bin/env bash
# GPU check for issue 5, on a machine with an NVIDIA GPU. Installs nothing from the network.
#   bash benchmarks/gpu_check.sh [OUT_DIR]      (default: $OUT, else benchmarks/out)
# 1. the GPU tests (tests/kernels/gpu, device tests included) -> gpu_tests.log
# 2. benchmarks/gpu_check.py: NTT and MSM 2^16..2^24 checked against the CPU path and timed,
#    bundled-circuit proofs on CUDA vs CPU, engine busy fraction -> gpu_check.json
# On the lent H200 (Python 3.12 image with numba-cuda and CuPy, no network): first, here,
# `bash benchmarks/gpu_wheels.sh`, then run this with `.whl` carried.
# Environment: PYTHON (default: .venv/bin/python, else /work/venv/bin/python, else python3),
# GPU_CHECK_ARGS (extra arguments for gpu_check.py, e.g. "--max-log 22 --skip engine").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-benchmarks/out}}"
mkdir -p "$OUT_DIR"
if [[ -z "${PYTHON:-}" ]]; then
  for cand in .venv/bin/python /work/venv/bin/python python3; do
    if command -v "$cand" >/dev/null 2>&1; then PYTHON="$cand"; break; fi
  done
fi
export PIP_NO_INDEX=1            # nothing may be fetched
# Wheels the device image lacks, made beforehand by benchmarks/gpu_wheels.sh and carried in .whl/.
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/cuzk-site .whl/*.whl || { echo "installing .whl failed"; exit 1; }
  export PYTHONPATH="/tmp/cuzk-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
unset NUMBA_ENABLE_CUDASIM
status=0
{ nvidia-smi || true; } > "$OUT_DIR/nvidia-smi.txt" 2>&1
"$PYTHON" - <<'PY' > "$OUT_DIR/toolchain.txt" 2>&1 || true
import cupy, numba, numba.cuda
from numba.cuda.cudadrv import nvvm
print("cupy", cupy.__version__, "numba", numba.__version__)
print("devices", cupy.cuda.runtime.getDeviceCount(), "driver", cupy.cuda.runtime.driverGetVersion())
print("nvvm", nvvm.NVVM().get_version())
PY
echo "== GPU tests"
"$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/kernels/gpu 2>&1 | tee "$OUT_DIR/gpu_tests.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
echo "== figures"
# shellcheck disable=SC2086
"$PYTHON" benchmarks/gpu_check.py --out "$OUT_DIR" ${GPU_CHECK_ARGS:-} 2>&1 | tee "$OUT_DIR/gpu_check.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
echo "gpu_check: results in $OUT_DIR (status $status)"
exit $status
