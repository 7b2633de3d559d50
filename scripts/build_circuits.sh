#!/usr/bin/env bash
# Rebuild the bundled circuits under cuzk/circuits/data/ reproducibly:
#   circuit.circom (generated from cuzk/circuits/registry.py), circuit.r1cs, circuit.wasm,
#   circuit.inputs.json (input signal names) and input.json (a satisfying sample).
# Needs the pinned node tools (`make node`) and a Python with cuzk's dependencies
# (PYTHON=..., default .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."

CIRCOM=node_modules/.bin/circom2
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
[[ -x "$CIRCOM" ]] || { echo "missing $CIRCOM: run 'make node' first" >&2; exit 1; }

DATA=cuzk/circuits/data
# circom2 runs under WASI with only the working directory visible: keep every path relative.
WORK=.cache/circuits-build
rm -rf "$WORK"
mkdir -p "$WORK"

compile() {  # compile SOURCE OUTDIR: circom's exact flags; its output goes to OUTDIR/log.txt
    mkdir -p "$2"
    if ! "$CIRCOM" "$1" --r1cs --wasm --sym --prime bls12381 -l node_modules -o "$2" >"$2/log.txt" 2>&1; then
        cat "$2/log.txt" >&2
        exit 1
    fi
}

"$PYTHON" -m cuzk.circuits.build sources

compile "$DATA/common/hash_pair.circom" "$WORK/hash_pair"
HASHER="$WORK/hash_pair/hash_pair_js/hash_pair.wasm"

for kind in winning-post snap-update window-post porep-c2; do
    out="$WORK/$kind"
    compile "$DATA/$kind/circuit.circom" "$out"
    cp "$out/circuit.r1cs" "$DATA/$kind/circuit.r1cs"
    cp "$out/circuit_js/circuit.wasm" "$DATA/$kind/circuit.wasm"
    "$PYTHON" -m cuzk.circuits.build finish "$kind" "$out/circuit.sym" "$HASHER"
    echo "$kind: $(grep -E 'non-linear|^linear|wires' "$out/log.txt" | sed 's/\x1b\[[0-9;]*m//g' | tr '\n' ' ')"
done
