#!/usr/bin/env bash
# Download, here, the wheels benchmarks/device_requirements.txt names (and their dependencies) for
# the GPU image's Python (default 3.12, x86-64 manylinux) into .whl/ (git-ignored), to be carried
# to the GPU machine with build/gpu-kernels. gpu_check.sh installs from .whl with no network, and
# pip there keeps every package the image already has at a version that satisfies the requirement,
# so nothing is deleted here by any list: the resolver on the device decides.
# Usage, from the repository root: bash benchmarks/gpu_wheels.sh     (PYVER=3.12 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PYVER=${PYVER:-3.12}
rm -rf .whl && mkdir -p .whl
platforms=(--platform manylinux2014_x86_64)
for n in 2_17 2_24 2_27 2_28 2_31 2_34 2_35; do platforms+=(--platform "manylinux_${n}_x86_64"); done
"$PY" -m pip download -q --only-binary=:all: --python-version "$PYVER" --implementation cp \
  "${platforms[@]}" -d .whl -r benchmarks/device_requirements.txt
ls .whl
du -sh .whl
