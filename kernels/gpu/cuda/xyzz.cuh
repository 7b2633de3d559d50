// Short-Weierstrass points (a = 0) in XYZZ coordinates over any field E of field.cuh (Fq for
// G1, Fq2 for G2): x = X / ZZ, y = Y / ZZZ, ZZ^3 = ZZZ^2, ZZ = 0 is infinity. Formulas from the
// Explicit-Formulas Database ("xyzz" for a = 0): madd-2008-s (8M + 2S), add-2008-s (12M + 2S),
// dbl-2008-s-1 and mdbl-2008-s-1. Affine inputs are the zkey's rows (x, y), all-zero meaning
// infinity ((0, 0) is on neither curve).
#pragma once
#include "field.cuh"

template <class E>
struct Xyzz {
    E X, Y, ZZ, ZZZ;
    static constexpr int WORDS = 4 * sizeof(E) / sizeof(u32);

    static CZ_HD Xyzz inf() { return {E::zero(), E::zero(), E::zero(), E::zero()}; }
    CZ_HD bool is_inf() const { return ZZ.is_zero(); }
    static CZ_HD Xyzz load(const u32* p) {
        constexpr int W = sizeof(E) / sizeof(u32);
        return {E::load(p), E::load(p + W), E::load(p + 2 * W), E::load(p + 3 * W)};
    }
    CZ_HD void store(u32* p) const {
        constexpr int W = sizeof(E) / sizeof(u32);
        X.store(p);
        Y.store(p + W);
        ZZ.store(p + 2 * W);
        ZZZ.store(p + 3 * W);
    }
};

// 2 * (x, y) for an affine point.
template <class E>
CZ_CALL Xyzz<E> xyzz_mdbl(const E& x, const E& y) {
    const E u = dbl(y);
    const E v = sqr(u);
    const E w = u * v;
    const E s = x * v;
    const E x2 = sqr(x);
    const E m = dbl(x2) + x2;
    Xyzz<E> r;
    r.X = sqr(m) - dbl(s);
    r.Y = m * (s - r.X) - w * y;
    r.ZZ = v;
    r.ZZZ = w;
    return r;
}

template <class E>
CZ_CALL void xyzz_dbl(Xyzz<E>& p) {
    if (p.is_inf()) return;
    const E u = dbl(p.Y);
    const E v = sqr(u);
    const E w = u * v;
    const E s = p.X * v;
    const E x2 = sqr(p.X);
    const E m = dbl(x2) + x2;
    const E x3 = sqr(m) - dbl(s);
    p.Y = m * (s - x3) - w * p.Y;
    p.X = x3;
    p.ZZ = p.ZZ * v;
    p.ZZZ = p.ZZZ * w;
}

// p += (x, y), or p -= (x, y) when negative.
template <class E>
CZ_CALL void xyzz_add_affine(Xyzz<E>& p, const E& x, const E& y0, bool negative) {
    if (x.is_zero() && y0.is_zero()) return;
    const E y = negative ? -y0 : y0;
    if (p.is_inf()) {
        p.X = x;
        p.Y = y;
        p.ZZ = E::one();
        p.ZZZ = E::one();
        return;
    }
    const E u2 = x * p.ZZ;
    const E s2 = y * p.ZZZ;
    const E pp_ = u2 - p.X;
    const E r = s2 - p.Y;
    if (pp_.is_zero()) {
        if (r.is_zero()) p = xyzz_mdbl(x, y);
        else p = Xyzz<E>::inf();
        return;
    }
    const E pp = sqr(pp_);
    const E ppp = pp_ * pp;
    const E q = p.X * pp;
    const E x3 = sqr(r) - ppp - dbl(q);
    p.Y = r * (q - x3) - p.Y * ppp;
    p.X = x3;
    p.ZZ = p.ZZ * pp;
    p.ZZZ = p.ZZZ * ppp;
}

// p += q, both XYZZ.
template <class E>
CZ_CALL void xyzz_add(Xyzz<E>& p, const Xyzz<E>& q) {
    if (q.is_inf()) return;
    if (p.is_inf()) {
        p = q;
        return;
    }
    const E u1 = p.X * q.ZZ;
    const E u2 = q.X * p.ZZ;
    const E s1 = p.Y * q.ZZZ;
    const E s2 = q.Y * p.ZZZ;
    const E pp_ = u2 - u1;
    const E r = s2 - s1;
    if (pp_.is_zero()) {
        if (r.is_zero()) xyzz_dbl(p);
        else p = Xyzz<E>::inf();
        return;
    }
    const E pp = sqr(pp_);
    const E ppp = pp_ * pp;
    const E q1 = u1 * pp;
    const E x3 = sqr(r) - ppp - dbl(q1);
    p.Y = r * (q1 - x3) - s1 * ppp;
    p.X = x3;
    p.ZZ = p.ZZ * q.ZZ * pp;
    p.ZZZ = p.ZZZ * q.ZZZ * ppp;
}

// k * p for a small k (a bucket index), double-and-add from the top bit.
template <class E>
CZ_CALL Xyzz<E> xyzz_mul_small(const Xyzz<E>& p, u32 k) {
    Xyzz<E> r = Xyzz<E>::inf();
    for (int bit = 31; bit >= 0; bit--) {
        xyzz_dbl(r);
        if ((k >> bit) & 1u) xyzz_add(r, p);
    }
    return r;
}
