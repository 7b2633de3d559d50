pragma circom 2.0.0;

// Written for cuzk's interop tests, outside the bundled circuits: out = sum(a[i] * w[i]) + offset,
// with a[] and offset public inputs, w[] private. Small enough for a power-of-tau of 2^4.
template WeightedSum(n) {
    signal input a[n];
    signal input w[n];
    signal input offset;
    signal output out;
    signal terms[n];
    var acc = 0;
    for (var i = 0; i < n; i++) {
        terms[i] <== a[i] * w[i];
        acc += terms[i];
    }
    out <== acc + offset;
}

component main {public [a, offset]} = WeightedSum(4);
