#!/usr/bin/env bash
# A user's circuit with a ceremony key, for `cuzk bench prover --r1cs/--zkey/--wtns`:
# circomlib's Sha256(512) (about 62,500 constraints) compiled with circom2 for BLS12-381, a key
# from snarkjs's own ceremony flow (powers of tau 2^16, one contribution, prepare phase2,
# groth16 setup, one phase-2 contribution) and the witness of a fixed input, all with the
# repository's pinned node packages. Cached: a second run prints the paths and does nothing.
# The ceremony takes tens of minutes on two loaded cores (prepare phase2 dominates); CI uses
# the small ceremony of tests/interop/conftest.py instead.
#
# Usage: benchmarks/ceremony_sha256.sh [DIR]   (default: ~/.cache/cuzk/bench/sha256_512)
# Then:  cuzk bench prover --r1cs DIR/sha.r1cs --zkey DIR/sha.zkey --wtns DIR/sha.wtns --repeat 3
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/node_modules/.bin"
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/cuzk/bench/sha256_512}"
mkdir -p "$dir"
cd "$dir"
if [[ -f sha.zkey && -f sha.wtns && -f vk.json ]]; then
  echo "cached: $dir/sha.r1cs $dir/sha.zkey $dir/sha.wtns"
  exit 0
fi
step() { echo "$(date -u +%H:%M:%S) $*" >&2; }
# circom2 runs in a WebAssembly sandbox that sees only the current directory: copy circomlib in.
rm -rf circomlib && cp -r "$root/node_modules/circomlib/circuits" circomlib
cat > sha.circom <<'EOF'
pragma circom 2.0.0;
include "circomlib/sha256/sha256.circom";
component main = Sha256(512);
EOF
step "compile"
"$bin/circom2" sha.circom --prime bls12381 --r1cs --wasm -o . >/dev/null
python3 -c 'import json; print(json.dumps({"in": [(i * 7 + i // 3) % 2 for i in range(512)]}))' \
  > input.json
step "witness"
"$bin/snarkjs" wtns calculate sha_js/sha.wasm input.json sha.wtns
step "powersoftau new 2^16"
"$bin/snarkjs" powersoftau new bls12381 16 pot0.ptau >/dev/null
step "powersoftau contribute"
"$bin/snarkjs" powersoftau contribute pot0.ptau pot1.ptau --name=first \
  -e="cuzk bench phase 1" >/dev/null
step "powersoftau prepare phase2"
"$bin/snarkjs" powersoftau prepare phase2 pot1.ptau pot.ptau >/dev/null
step "groth16 setup"
"$bin/snarkjs" groth16 setup sha.r1cs pot.ptau sha0.zkey >/dev/null
step "zkey contribute"
"$bin/snarkjs" zkey contribute sha0.zkey sha.zkey --name=second -e="cuzk bench phase 2" >/dev/null
"$bin/snarkjs" zkey export verificationkey sha.zkey vk.json >/dev/null
rm -f pot0.ptau pot1.ptau sha0.zkey
step "done: $dir/sha.r1cs $dir/sha.zkey $dir/sha.wtns"
