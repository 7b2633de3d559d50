#!/usr/bin/env bash
# Download, here, the wheels the GPU check needs that the device image lacks, for the device's
# Python 3.12 on x86-64, into .whl/ (git-ignored). gpu_check.sh installs them from there with no
# network. The image already has numba, numba-cuda, CuPy, the CUDA toolkit, numpy, protobuf,
# grpcio, pytest, hypothesis, rich, httpx, prometheus-client and the usual small libraries: those
# are dropped so the image's own versions (which CuPy and numba were built against) stay in use.
# Usage, from the repository root: bash benchmarks/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
PY=${PYTHON:-python3}
platforms=()
for n in 2_17 2_24 2_27 2_28 2_31 2_34 2_35; do platforms+=(--platform "manylinux_${n}_x86_64"); done
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 "${platforms[@]}" -d .whl \
  "py_arkworks_bls12381==0.5.*" "wasmtime==50.*" "opentelemetry-sdk==1.45.*" \
  "opentelemetry-exporter-otlp==1.45.*" "starlette>=0.45" "uvicorn>=0.30"
# Packages the device image provides (KINDS.md's list): keep its versions.
device_has='numpy protobuf grpcio typing_extensions typing_inspection anyio h11 click idna sniffio
packaging requests urllib3 certifi charset_normalizer zipp wrapt importlib_metadata'
for name in $device_has; do rm -f .whl/"$name"-*.whl; done
ls .whl
du -sh .whl
