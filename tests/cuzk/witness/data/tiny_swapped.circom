pragma circom 2.0.0;
// tiny.circom's shape (3 inputs, 1 output, 2 constraints, 6 signals) with another relation:
// its witnesses break tiny.r1cs's first constraint (a * b = ab).
template Tiny() {
    signal input a;
    signal input b;
    signal input c;
    signal output out;
    signal ab;
    ab <== a * c;
    out <== ab * b + a;
}
component main {public [a]} = Tiny();
