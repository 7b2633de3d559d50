/* BLS12-381 base field Fp (6 x 64-bit limbs, Montgomery form with R = 2^384, as in the zkey)
 * and its quadratic extension Fp2 = Fp[u]/(u^2 + 1). Included once per arithmetic path with
 * ARCH defined (the names get ARCH as suffix), so the same source compiles once portably and
 * once for CPUs with the BMI2/ADX wide-multiply and carry instructions. */

#define F(name) XCAT(name, ARCH)

/* r = t - p when t >= p, else t (t < 2p). */
static inline void F(fp_cond_sub_p)(u64 r[6], const u64 t[6]) {
    u64 s0, s1, s2, s3, s4, s5;
    unsigned char b = SUBB(0, t[0], FP_P[0], &s0);
    b = SUBB(b, t[1], FP_P[1], &s1);
    b = SUBB(b, t[2], FP_P[2], &s2);
    b = SUBB(b, t[3], FP_P[3], &s3);
    b = SUBB(b, t[4], FP_P[4], &s4);
    b = SUBB(b, t[5], FP_P[5], &s5);
    u64 keep = (u64)0 - b; /* borrow: t < p, keep t */
    r[0] = (t[0] & keep) | (s0 & ~keep);
    r[1] = (t[1] & keep) | (s1 & ~keep);
    r[2] = (t[2] & keep) | (s2 & ~keep);
    r[3] = (t[3] & keep) | (s3 & ~keep);
    r[4] = (t[4] & keep) | (s4 & ~keep);
    r[5] = (t[5] & keep) | (s5 & ~keep);
}

static inline void F(fp_add)(u64 r[6], const u64 a[6], const u64 b[6]) {
    u64 t[6];
    unsigned char c = ADDC(0, a[0], b[0], &t[0]);
    c = ADDC(c, a[1], b[1], &t[1]);
    c = ADDC(c, a[2], b[2], &t[2]);
    c = ADDC(c, a[3], b[3], &t[3]);
    c = ADDC(c, a[4], b[4], &t[4]);
    (void)ADDC(c, a[5], b[5], &t[5]); /* a + b < 2p < 2^382: no carry out */
    F(fp_cond_sub_p)(r, t);
}

static inline void F(fp_sub)(u64 r[6], const u64 a[6], const u64 b[6]) {
    u64 t0, t1, t2, t3, t4, t5;
    unsigned char br = SUBB(0, a[0], b[0], &t0);
    br = SUBB(br, a[1], b[1], &t1);
    br = SUBB(br, a[2], b[2], &t2);
    br = SUBB(br, a[3], b[3], &t3);
    br = SUBB(br, a[4], b[4], &t4);
    br = SUBB(br, a[5], b[5], &t5);
    u64 mask = (u64)0 - br; /* add p back when a < b */
    unsigned char c = ADDC(0, t0, FP_P[0] & mask, &r[0]);
    c = ADDC(c, t1, FP_P[1] & mask, &r[1]);
    c = ADDC(c, t2, FP_P[2] & mask, &r[2]);
    c = ADDC(c, t3, FP_P[3] & mask, &r[3]);
    c = ADDC(c, t4, FP_P[4] & mask, &r[4]);
    (void)ADDC(c, t5, FP_P[5] & mask, &r[5]);
}

static inline void F(fp_dbl)(u64 r[6], const u64 a[6]) { F(fp_add)(r, a, a); }

static inline int F(fp_is_zero)(const u64 a[6]) {
    return (a[0] | a[1] | a[2] | a[3] | a[4] | a[5]) == 0;
}

static inline void F(fp_neg)(u64 r[6], const u64 a[6]) {
    static const u64 zero[6] = {0, 0, 0, 0, 0, 0};
    F(fp_sub)(r, zero, a);
}

/* Montgomery product a*b/R mod p (CIOS), operand scanning with the reduction interleaved; the
 * top limb of p is below 2^62, so the running sum never needs an extra carry word. Unrolled over
 * named locals, with explicit carry adds (adc), so the running sum stays in registers. MUL64 is
 * mulx on the fast path, a 64x64->128 multiply otherwise (defined by the includer). */
#define FP_ROUND(ai)                                             \
    do {                                                         \
        u64 A_ = 0, C_ = 0, m_, d_;                              \
        MONT_MAC(t0, ai, b0, A_);                                \
        m_ = t0 * FP_INV;                                        \
        MONT_RED(d_, t0, m_, FP_P[0], C_);                       \
        (void)d_;                                                \
        MONT_LIMB(t0, t1, ai, b1, m_, FP_P[1], A_, C_);          \
        MONT_LIMB(t1, t2, ai, b2, m_, FP_P[2], A_, C_);          \
        MONT_LIMB(t2, t3, ai, b3, m_, FP_P[3], A_, C_);          \
        MONT_LIMB(t3, t4, ai, b4, m_, FP_P[4], A_, C_);          \
        MONT_LIMB(t4, t5, ai, b5, m_, FP_P[5], A_, C_);          \
        t5 = C_ + A_;                                            \
    } while (0)

static inline void F(fp_mul)(u64 r[6], const u64 a[6], const u64 b[6]) {
#ifdef FP_MUL_ASM
    u64 m[6];
    FP_MUL_ASM(m, a, b);
    F(fp_cond_sub_p)(r, m);
#else
    const u64 b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3], b4 = b[4], b5 = b[5];
    const u64 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
    u64 t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0, t5 = 0;
    FP_ROUND(a0);
    FP_ROUND(a1);
    FP_ROUND(a2);
    FP_ROUND(a3);
    FP_ROUND(a4);
    FP_ROUND(a5);
    u64 t[6] = {t0, t1, t2, t3, t4, t5};
    F(fp_cond_sub_p)(r, t);
#endif
}

#undef FP_ROUND

static inline void F(fp_sqr)(u64 r[6], const u64 a[6]) { F(fp_mul)(r, a, a); }

/* a^e with 4-bit windows: 384 squarings and one multiply per nonzero nibble (about 90 for
 * p - 2, against about 190 bit by bit): the batch-affine buckets invert once per batch. */
static void F(fp_pow)(u64 r[6], const u64 a[6], const u64 e[6]) {
    u64 pw[16][6], acc[6];
    memcpy(pw[0], FP_ONE, sizeof pw[0]);
    memcpy(pw[1], a, sizeof pw[1]);
    for (int k = 2; k < 16; k++) F(fp_mul)(pw[k], pw[k - 1], a);
    memcpy(acc, FP_ONE, sizeof acc);
    for (int i = 5; i >= 0; i--) {
        for (int sh = 60; sh >= 0; sh -= 4) {
            for (int k = 0; k < 4; k++) F(fp_sqr)(acc, acc);
            unsigned nib = (unsigned)((e[i] >> sh) & 15);
            if (nib) F(fp_mul)(acc, acc, pw[nib]);
        }
    }
    memcpy(r, acc, sizeof acc);
}

static void F(fp_inv)(u64 r[6], const u64 a[6]) { F(fp_pow)(r, a, FP_P_MINUS_2); }

/* Montgomery -> normal form: multiply by plain 1. */
static void F(fp_from_mont)(u64 r[6], const u64 a[6]) {
    static const u64 one[6] = {1, 0, 0, 0, 0, 0};
    F(fp_mul)(r, a, one);
}

/* ---- Fp2: c0 in limbs 0..5, c1 in limbs 6..11 (the zkey's order) ---- */

static inline void F(fp2_add)(u64 r[12], const u64 a[12], const u64 b[12]) {
    F(fp_add)(r, a, b);
    F(fp_add)(r + 6, a + 6, b + 6);
}

static inline void F(fp2_sub)(u64 r[12], const u64 a[12], const u64 b[12]) {
    F(fp_sub)(r, a, b);
    F(fp_sub)(r + 6, a + 6, b + 6);
}

static inline void F(fp2_dbl)(u64 r[12], const u64 a[12]) { F(fp2_add)(r, a, a); }

static inline int F(fp2_is_zero)(const u64 a[12]) {
    return F(fp_is_zero)(a) && F(fp_is_zero)(a + 6);
}

static inline void F(fp2_neg)(u64 r[12], const u64 a[12]) {
    F(fp_neg)(r, a);
    F(fp_neg)(r + 6, a + 6);
}

static inline void F(fp2_mul)(u64 r[12], const u64 a[12], const u64 b[12]) {
    u64 t0[6], t1[6], sa[6], sb[6], t2[6];
    F(fp_mul)(t0, a, b);
    F(fp_mul)(t1, a + 6, b + 6);
    F(fp_add)(sa, a, a + 6);
    F(fp_add)(sb, b, b + 6);
    F(fp_mul)(t2, sa, sb);
    F(fp_sub)(r, t0, t1);
    F(fp_sub)(t2, t2, t0);
    F(fp_sub)(r + 6, t2, t1);
}

static inline void F(fp2_sqr)(u64 r[12], const u64 a[12]) {
    u64 s[6], d[6], m[6];
    F(fp_add)(s, a, a + 6);
    F(fp_sub)(d, a, a + 6);
    F(fp_mul)(m, a, a + 6);
    F(fp_mul)(r, s, d);
    F(fp_dbl)(r + 6, m);
}

static void F(fp2_inv)(u64 r[12], const u64 a[12]) {
    u64 n0[6], n1[6], n[6], ninv[6];
    F(fp_sqr)(n0, a);
    F(fp_sqr)(n1, a + 6);
    F(fp_add)(n, n0, n1); /* norm a0^2 + a1^2 */
    F(fp_inv)(ninv, n);
    F(fp_mul)(r, a, ninv);
    u64 t[6];
    F(fp_mul)(t, a + 6, ninv);
    F(fp_neg)(r + 6, t);
}

static void F(fp2_from_mont)(u64 r[12], const u64 a[12]) {
    F(fp_from_mont)(r, a);
    F(fp_from_mont)(r + 6, a + 6);
}

#undef F
