#!/usr/bin/env bash
# Download, here, the wheels benchmarks/device_requirements.txt names (and their dependencies) for
# the GPU image's Python (default 3.12, x86-64 manylinux) into .whl/ (git-ignored), to be carried
# to the GPU machine with build/gpu-kernels. gpu_check.sh installs every wheel of .whl with
# --no-deps into a target directory on PYTHONPATH: the image's own packages are removed from .whl
# here (below), so they are never shadowed.
# Usage, from the repository root: bash benchmarks/gpu_wheels.sh     (PYVER=3.12 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PYVER=${PYVER:-3.12}
rm -rf .whl && mkdir -p .whl
platforms=(--platform manylinux2014_x86_64)
for n in 2_17 2_24 2_27 2_28 2_31 2_34 2_35; do platforms+=(--platform "manylinux_${n}_x86_64"); done
"$PY" -m pip download -q --only-binary=:all: --python-version "$PYVER" --implementation cp \
  "${platforms[@]}" -d .whl -c constraints.txt -r benchmarks/device_requirements.txt
# The image's own packages (and what only they need) stay the image's: a wheel of them on
# PYTHONPATH would shadow the CuPy/numba build the image was made with.
rm -f .whl/numpy-* .whl/numba-* .whl/llvmlite-* .whl/cupy* .whl/nvidia_* .whl/cuda_* \
  .whl/fastrlock-* .whl/pytest-* .whl/pluggy-* .whl/iniconfig-* .whl/packaging-*
ls .whl
du -sh .whl
