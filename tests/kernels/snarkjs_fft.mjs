// Reference transforms from ffjavascript (what snarkjs's groth16 prover uses), for the NTT tests.
// stdin: {"values": ["dec", ...]}  stdout: {"fft": [...], "ifft": [...], "odd": [...]} (decimal,
// normal form); "odd" is fft(batchApplyKey(ifft(values), 1, w[power+1])) as in groth16_prove.js.
import { buildBls12381 } from "ffjavascript";

const input = JSON.parse(await new Promise((resolve) => {
    let s = "";
    process.stdin.on("data", (d) => { s += d; });
    process.stdin.on("end", () => resolve(s));
}));
const curve = await buildBls12381(true);
const Fr = curve.Fr;
const n = input.values.length;
const power = Math.log2(n);
const buff = new Uint8Array(n * Fr.n8);
input.values.forEach((v, i) => buff.set(Fr.e(BigInt(v)), i * Fr.n8));
const dec = (b) => Array.from({ length: n }, (_, i) => Fr.toObject(b.slice(i * Fr.n8, (i + 1) * Fr.n8)).toString());
const fft = await Fr.fft(buff);
const ifft = await Fr.ifft(buff);
const inc = power == Fr.s ? Fr.shift : Fr.w[power + 1];
const odd = await Fr.fft(await Fr.batchApplyKey(await Fr.ifft(buff), Fr.e(1), inc));
process.stdout.write(JSON.stringify({ fft: dec(fft), ifft: dec(ifft), odd: dec(odd) }));
await curve.terminate();
