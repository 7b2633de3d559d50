// Montgomery prime-field arithmetic on 32-bit limbs, generic over the modulus and limb count.
//
// A field is a traits struct (see bls12_381.cuh): N limbs, N0INV = -p^-1 mod 2^32, mod(i) the
// i-th limb of p, one(i) the i-th limb of R mod p. Elements are little-endian u32[N] in
// Montgomery form (x * 2^(32N) mod p), fully reduced (< p). The code assumes p < 2^(32N - 1):
// one spare top bit (BLS12-381's Fq: 381 bits in 384; its Fr: 255 bits in 256). That is all it
// needs, with W = 2^32 and inputs < p:
// * a + b < 2p < 2^(32N): the sum fits N limbs (the add's last carry is always 0), then one
//   conditional subtraction; a - b adds p back on a borrow (wraps mod 2^(32N), exact).
// * CIOS keeps its running value t < 2p (t' = (t + a*b_i + m*p) / W < (2p + 2(W-1)p) / W = 2p),
//   and the value before the shift is < 2pW < 2^(32N + 32): N limbs plus one word, so neither
//   row's chains carry out of t[N], and the final t < 2p needs one conditional subtraction.
//
// Two implementations of the multiply, chosen at compile time:
// * on the device (nvcc, unless CUZK_PORTABLE_FIELD is defined): CIOS with PTX carry chains
//   (mad.lo.cc / madc.hi.cc), the reduction interleaved row by row. Each row is two chains:
//   the low halves of a_j * b_i, then the high halves one limb up.
// * portable (the host twin the CPU tests run, and the device's CUZK_PORTABLE_FIELD build the
//   device check compares against): the same CIOS with 64-bit products.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;

#if defined(__CUDACC__)
#define CZ_HD __host__ __device__ __forceinline__
// Point operations are called, not inlined: each is thousands of instructions (its field
// multiplies inlined), and a call costs the accumulator's round trip through the L1-resident
// stack, a few percent; inlining them into every kernel multiplied nvcc's time by ten.
#define CZ_CALL __host__ __device__ __noinline__
#else
#define CZ_HD inline
#define CZ_CALL inline
#endif

#if defined(__CUDA_ARCH__) && !defined(CUZK_PORTABLE_FIELD)
#define CUZK_PTX_FIELD 1
#endif

// Code size: every point operation holds 10-20 multiplies, each ~650 instructions unrolled, far
// beyond a multiprocessor's instruction cache. Two builds the device check compares shrink it:
// CUZK_CALL_MUL calls the multiply instead of inlining it; CUZK_ROW_LOOP keeps it inline but
// loops over its rows (one row's chains unrolled, ~1/12 of the code).
#if defined(CUZK_CALL_MUL) && defined(__CUDACC__)
#define CZ_MUL __host__ __device__ __noinline__
#else
#define CZ_MUL CZ_HD
#endif
#if defined(CUZK_ROW_LOOP)
#define CZ_ROWS _Pragma("unroll 1")
#else
#define CZ_ROWS _Pragma("unroll")
#endif

template <class F>
struct Fp {
    static constexpr int N = F::N;
    u32 v[F::N];

    static CZ_HD Fp zero() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    static CZ_HD Fp one() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = F::one(i);
        return r;
    }
    static CZ_HD Fp load(const u32* p) {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = p[i];
        return r;
    }
    CZ_HD void store(u32* p) const {
#pragma unroll
        for (int i = 0; i < N; i++) p[i] = v[i];
    }
    CZ_HD bool is_zero() const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
};

// r = t - p when t >= p, else t (t < 2p). Branch-free select on the borrow.
template <class F>
CZ_HD void fp_reduce_once(u32* r, const u32* t) {
    constexpr int N = F::N;
    u32 d[N];
#if defined(CUZK_PTX_FIELD)
    u32 borrow;
    asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(d[0]) : "r"(t[0]), "r"(F::mod(0)));
#pragma unroll
    for (int i = 1; i < N; i++)
        asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(d[i]) : "r"(t[i]), "r"(F::mod(i)));
    asm volatile("subc.u32 %0, 0, 0;" : "=r"(borrow));
#else
    u64 b = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        u64 s = (u64)t[i] - F::mod(i) - b;
        d[i] = (u32)s;
        b = (s >> 32) & 1;
    }
    u32 borrow = b ? 0xffffffffu : 0u;
#endif
#pragma unroll
    for (int i = 0; i < N; i++) r[i] = borrow ? t[i] : d[i];
}

template <class F>
CZ_HD Fp<F> operator+(const Fp<F>& a, const Fp<F>& b) {
    constexpr int N = F::N;
    u32 t[N];
#if defined(CUZK_PTX_FIELD)
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(t[0]) : "r"(a.v[0]), "r"(b.v[0]));
#pragma unroll
    for (int i = 1; i < N; i++)
        asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(t[i]) : "r"(a.v[i]), "r"(b.v[i]));
#else
    u64 c = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        u64 s = (u64)a.v[i] + b.v[i] + c;
        t[i] = (u32)s;
        c = s >> 32;
    }
#endif
    Fp<F> r;
    fp_reduce_once<F>(r.v, t);
    return r;
}

template <class F>
CZ_HD Fp<F> operator-(const Fp<F>& a, const Fp<F>& b) {
    constexpr int N = F::N;
    Fp<F> r;
    u32 t[N];
#if defined(CUZK_PTX_FIELD)
    u32 borrow;
    asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(t[0]) : "r"(a.v[0]), "r"(b.v[0]));
#pragma unroll
    for (int i = 1; i < N; i++)
        asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(t[i]) : "r"(a.v[i]), "r"(b.v[i]));
    asm volatile("subc.u32 %0, 0, 0;" : "=r"(borrow));
    // add p back where a < b: p & borrow mask
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(t[0]), "r"(F::mod(0) & borrow));
#pragma unroll
    for (int i = 1; i < N; i++)
        asm volatile("addc.cc.u32 %0, %1, %2;"
                     : "=r"(r.v[i]) : "r"(t[i]), "r"(F::mod(i) & borrow));
#else
    u64 br = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        u64 s = (u64)a.v[i] - b.v[i] - br;
        t[i] = (u32)s;
        br = (s >> 32) & 1;
    }
    u32 mask = br ? 0xffffffffu : 0u;
    u64 c = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        u64 s = (u64)t[i] + (F::mod(i) & mask) + c;
        r.v[i] = (u32)s;
        c = s >> 32;
    }
#endif
    return r;
}

template <class F>
CZ_HD Fp<F> operator-(const Fp<F>& a) {
    return Fp<F>::zero() - a;
}

// Montgomery product a * b / 2^(32N) mod p (CIOS, reduction interleaved with each row).
template <class F>
CZ_MUL Fp<F> operator*(const Fp<F>& a, const Fp<F>& b) {
    constexpr int N = F::N;
    u32 t[N + 1];
#pragma unroll
    for (int i = 0; i <= N; i++) t[i] = 0;
#if defined(CUZK_PTX_FIELD)
    CZ_ROWS
    for (int i = 0; i < N; i++) {
        const u32 bi = b.v[i];
        // t += a * bi: low halves into t[0..N-1] (carry into t[N], which is 0 here) ...
        asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(a.v[0]), "r"(bi));
#pragma unroll
        for (int j = 1; j < N; j++)
            asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(a.v[j]), "r"(bi));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N]));
        // ... then the high halves, one limb up (no carry out: t + a*bi < 2^(32N+32)).
        asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(a.v[0]), "r"(bi));
#pragma unroll
        for (int j = 1; j < N - 1; j++)
            asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;"
                         : "+r"(t[j + 1]) : "r"(a.v[j]), "r"(bi));
        asm volatile("madc.hi.u32 %0, %1, %2, %0;" : "+r"(t[N]) : "r"(a.v[N - 1]), "r"(bi));
        // t += m * p with m chosen so that t[0] becomes 0, then t >>= 32.
        const u32 m = t[0] * F::N0INV;
        asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(m), "r"(F::mod(0)));
#pragma unroll
        for (int j = 1; j < N; j++)
            asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;"
                         : "+r"(t[j]) : "r"(m), "r"(F::mod(j)));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N]));
        asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(m), "r"(F::mod(0)));
#pragma unroll
        for (int j = 1; j < N - 1; j++)
            asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;"
                         : "+r"(t[j + 1]) : "r"(m), "r"(F::mod(j)));
        asm volatile("madc.hi.u32 %0, %1, %2, %0;" : "+r"(t[N]) : "r"(m), "r"(F::mod(N - 1)));
#pragma unroll
        for (int j = 0; j < N; j++) t[j] = t[j + 1];
        t[N] = 0;
    }
#else
    CZ_ROWS
    for (int i = 0; i < N; i++) {
        const u64 bi = b.v[i];
        u64 c = 0;
#pragma unroll
        for (int j = 0; j < N; j++) {
            u64 s = (u64)a.v[j] * bi + t[j] + c;
            t[j] = (u32)s;
            c = s >> 32;
        }
        t[N] += (u32)c;                 // t < 2^(32N + 32): no carry beyond t[N]
        const u64 m = (u32)(t[0] * F::N0INV);
        u64 s = m * F::mod(0) + t[0];
        c = s >> 32;
#pragma unroll
        for (int j = 1; j < N; j++) {
            s = m * F::mod(j) + t[j] + c;
            t[j - 1] = (u32)s;
            c = s >> 32;
        }
        s = (u64)t[N] + c;
        t[N - 1] = (u32)s;
        t[N] = (u32)(s >> 32);
    }
#endif
    Fp<F> r;
    fp_reduce_once<F>(r.v, t);
    return r;
}

template <class F>
CZ_HD Fp<F> sqr(const Fp<F>& a) {
    return a * a;
}

template <class F>
CZ_HD Fp<F> dbl(const Fp<F>& a) {
    return a + a;
}

// Quadratic extension F[u] / (u^2 + 1) (BLS12-381's Fq2), Karatsuba.
template <class F>
struct Fp2 {
    Fp<F> c0, c1;
    static constexpr int WORDS = 2 * F::N;

    static CZ_HD Fp2 zero() { return {Fp<F>::zero(), Fp<F>::zero()}; }
    static CZ_HD Fp2 one() { return {Fp<F>::one(), Fp<F>::zero()}; }
    static CZ_HD Fp2 load(const u32* p) { return {Fp<F>::load(p), Fp<F>::load(p + F::N)}; }
    CZ_HD void store(u32* p) const {
        c0.store(p);
        c1.store(p + F::N);
    }
    CZ_HD bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
};

template <class F>
CZ_HD Fp2<F> operator+(const Fp2<F>& a, const Fp2<F>& b) {
    return {a.c0 + b.c0, a.c1 + b.c1};
}
template <class F>
CZ_HD Fp2<F> operator-(const Fp2<F>& a, const Fp2<F>& b) {
    return {a.c0 - b.c0, a.c1 - b.c1};
}
template <class F>
CZ_HD Fp2<F> operator-(const Fp2<F>& a) {
    return {-a.c0, -a.c1};
}
template <class F>
CZ_HD Fp2<F> operator*(const Fp2<F>& a, const Fp2<F>& b) {
    const Fp<F> t0 = a.c0 * b.c0;
    const Fp<F> t1 = a.c1 * b.c1;
    const Fp<F> t2 = (a.c0 + a.c1) * (b.c0 + b.c1);
    return {t0 - t1, t2 - t0 - t1};
}
template <class F>
CZ_HD Fp2<F> sqr(const Fp2<F>& a) {
    const Fp<F> t = a.c0 * a.c1;
    return {(a.c0 + a.c1) * (a.c0 - a.c1), t + t};
}
template <class F>
CZ_HD Fp2<F> dbl(const Fp2<F>& a) {
    return a + a;
}
