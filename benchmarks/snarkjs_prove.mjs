// Time snarkjs.groth16.prove in one warm node process, so the comparison with cuzk leaves out
// node start-up and curve set-up. Usage: node snarkjs_prove.mjs ZKEY WTNS REPEAT -> JSON seconds.
import { groth16 } from "snarkjs";
import { performance } from "node:perf_hooks";

const [zkey, wtns, repeatArg] = process.argv.slice(2);
const repeat = Number(repeatArg || 3);
await groth16.prove(zkey, wtns); // warm-up: curve wasm, thread pool, file cache
const seconds = [];
for (let i = 0; i < repeat; i++) {
  const t0 = performance.now();
  await groth16.prove(zkey, wtns);
  seconds.push((performance.now() - t0) / 1000);
}
console.log(JSON.stringify({ seconds }));
process.exit(0);
