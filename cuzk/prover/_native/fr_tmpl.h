/* BLS12-381 scalar field Fr (4 x 64-bit limbs, Montgomery form with R = 2^256, as in the zkey)
 * and the QAP kernels built on it: buildABC1 rows, the radix-2 NTT stages, the H join. Included
 * once per arithmetic path with ARCH defined (names get ARCH as suffix), like fp_tmpl.h. */

#define F(name) XCAT(name, ARCH)

/* r = t - r_mod when t >= r_mod, else t (t < 2r). */
static inline void F(fr_cond_sub)(u64 r[4], const u64 t[4]) {
    u64 s0, s1, s2, s3;
    unsigned char b = SUBB(0, t[0], FR_P[0], &s0);
    b = SUBB(b, t[1], FR_P[1], &s1);
    b = SUBB(b, t[2], FR_P[2], &s2);
    b = SUBB(b, t[3], FR_P[3], &s3);
    u64 keep = (u64)0 - b;
    r[0] = (t[0] & keep) | (s0 & ~keep);
    r[1] = (t[1] & keep) | (s1 & ~keep);
    r[2] = (t[2] & keep) | (s2 & ~keep);
    r[3] = (t[3] & keep) | (s3 & ~keep);
}

static inline void F(fr_add)(u64 r[4], const u64 a[4], const u64 b[4]) {
    u64 t[4];
    unsigned char c = ADDC(0, a[0], b[0], &t[0]);
    c = ADDC(c, a[1], b[1], &t[1]);
    c = ADDC(c, a[2], b[2], &t[2]);
    (void)ADDC(c, a[3], b[3], &t[3]); /* a + b < 2r < 2^256: no carry out */
    F(fr_cond_sub)(r, t);
}

static inline void F(fr_sub)(u64 r[4], const u64 a[4], const u64 b[4]) {
    u64 t0, t1, t2, t3;
    unsigned char br = SUBB(0, a[0], b[0], &t0);
    br = SUBB(br, a[1], b[1], &t1);
    br = SUBB(br, a[2], b[2], &t2);
    br = SUBB(br, a[3], b[3], &t3);
    u64 mask = (u64)0 - br; /* add r back when a < b */
    unsigned char c = ADDC(0, t0, FR_P[0] & mask, &r[0]);
    c = ADDC(c, t1, FR_P[1] & mask, &r[1]);
    c = ADDC(c, t2, FR_P[2] & mask, &r[2]);
    (void)ADDC(c, t3, FR_P[3] & mask, &r[3]);
}

/* Montgomery product a*b/R mod r (CIOS with the reduction interleaved). r's top limb is below
 * 2^63 - 1, so the running sum needs no extra carry word (as in fp_tmpl.h). */
#define FR_ROUND(ai)                                             \
    do {                                                         \
        u64 A_ = 0, C_ = 0, m_, d_;                              \
        MONT_MAC(t0, ai, b0, A_);                                \
        m_ = t0 * FR_INV;                                        \
        MONT_RED(d_, t0, m_, FR_P[0], C_);                       \
        (void)d_;                                                \
        MONT_LIMB(t0, t1, ai, b1, m_, FR_P[1], A_, C_);          \
        MONT_LIMB(t1, t2, ai, b2, m_, FR_P[2], A_, C_);          \
        MONT_LIMB(t2, t3, ai, b3, m_, FR_P[3], A_, C_);          \
        t3 = C_ + A_;                                            \
    } while (0)

static inline void F(fr_mul)(u64 r[4], const u64 a[4], const u64 b[4]) {
#ifdef FR_MUL_ASM
    u64 m[4];
    FR_MUL_ASM(m, a, b);
    F(fr_cond_sub)(r, m);
#else
    const u64 b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3];
    const u64 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    u64 t0 = 0, t1 = 0, t2 = 0, t3 = 0;
    FR_ROUND(a0);
    FR_ROUND(a1);
    FR_ROUND(a2);
    FR_ROUND(a3);
    u64 t[4] = {t0, t1, t2, t3};
    F(fr_cond_sub)(r, t);
#endif
}

#undef FR_ROUND

/* base^e (Montgomery in and out). */
static void F(fr_pow)(u64 r[4], const u64 base[4], u64 e) {
    u64 acc[4], b[4];
    memcpy(acc, FR_ONE, sizeof acc);
    memcpy(b, base, sizeof b);
    while (e) {
        if (e & 1) F(fr_mul)(acc, acc, b);
        F(fr_mul)(b, b, b);
        e >>= 1;
    }
    memcpy(r, acc, sizeof acc);
}

/* ---- buildABC1: rows [lo, hi) of a, b (zeroed by the caller) and c = a*b ---- */

static void F(abc_rows)(const struct abc_ctx *x, size_t lo, size_t hi) {
    u64 t[4];
    for (size_t i = 0; i < x->m; i++) {
        size_t row = x->constraint[i];
        if (row < lo || row >= hi) continue;
        /* coef is c*R^2, witness is normal: the Montgomery product is Montgomery(c*w) */
        F(fr_mul)(t, x->values + 4 * i, x->witness + 4 * (size_t)x->signal[i]);
        u64 *dst = (x->matrix[i] == 0 ? x->a : x->b) + 4 * row;
        F(fr_add)(dst, dst, t);
    }
    for (size_t row = lo; row < hi; row++)
        F(fr_mul)(x->c + 4 * row, x->a + 4 * row, x->b + 4 * row);
}

static void *F(abc_worker)(void *arg) {
    const struct worker *w = arg;
    const struct abc_ctx *x = w->ctx;
    F(abc_rows)(x, x->n * w->id / x->threads, x->n * (w->id + 1) / x->threads);
    return NULL;
}

/* ---- NTT stages (kernels/ntt.py's schedule, bit-identical results) ---- */

/* One DIT stage of half-size m = 2^log_m over butterflies [lo, hi) of x (in place). Butterfly b
 * pairs i0 = (b >> log_m) << (log_m + 1) | (b & (m - 1)) with i1 = i0 + m, twiddle
 * w^(j * n / (2m)); the inverse uses w^-k = -w^(n/2 - k): same table, add/sub swapped. */
static void F(bfly_range)(u64 *x, const u64 *tw, int log_n, int inverse, int log_m, size_t lo,
                          size_t hi) {
    const size_t m = (size_t)1 << log_m, mask = m - 1, half = (size_t)1 << (log_n - 1);
    const int shift = log_n - 1 - log_m;
    u64 v[4];
    for (size_t b = lo; b < hi; b++) {
        size_t j = b & mask;
        size_t i0 = ((b >> log_m) << (log_m + 1)) | j;
        u64 *x0 = x + 4 * i0, *x1 = x + 4 * (i0 + m);
        if (j == 0) {
            memcpy(v, x1, sizeof v);
            F(fr_sub)(x1, x0, v);
            F(fr_add)(x0, x0, v);
        } else if (!inverse) {
            F(fr_mul)(v, x1, tw + 4 * (j << shift));
            F(fr_sub)(x1, x0, v);
            F(fr_add)(x0, x0, v);
        } else {
            F(fr_mul)(v, x1, tw + 4 * (half - (j << shift)));
            F(fr_add)(x1, x0, v);
            F(fr_sub)(x0, x0, v);
        }
    }
}

/* Gather rows [lo, hi) of dst from src in bit-reversed order, then every stage whose butterflies
 * stay inside 2^log_block-aligned blocks, cache-sized sub-blocks first. */
static void F(phase_local)(u64 *dst, const u64 *src, const u64 *tw, int log_n, int inverse,
                           int log_block, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i++)
        memcpy(dst + 4 * i, src + 4 * bitrev(i, log_n), 32);
    int log_sub = log_block < CACHE_LOG ? log_block : CACHE_LOG;
    size_t sub = (size_t)1 << log_sub;
    for (size_t s0 = lo; s0 < hi; s0 += sub)
        for (int log_m = 0; log_m < log_sub; log_m++)
            F(bfly_range)(dst, tw, log_n, inverse, log_m, s0 >> 1, (s0 + sub) >> 1);
    for (int log_m = log_sub; log_m < log_block; log_m++)
        F(bfly_range)(dst, tw, log_n, inverse, log_m, lo >> 1, hi >> 1);
}

/* The last stage (m = n/2) over butterflies [lo, hi), each output then scaled: MODE_COSET
 * multiplies x[j] by s0 * g^(j - lo) and x[j + m] by that times gm = g^m. */
static void F(phase_last)(u64 *x, const u64 *tw, int log_n, int inverse, size_t lo, size_t hi,
                          int mode, const u64 s0[4], const u64 g[4], const u64 gm[4]) {
    const size_t m = (size_t)1 << (log_n - 1);
    u64 s[4], s_hi[4];
    memcpy(s, s0, sizeof s);
    for (size_t b = lo; b < hi; b++) {
        F(bfly_range)(x, tw, log_n, inverse, log_n - 1, b, b + 1);
        if (mode == MODE_NONE) continue;
        F(fr_mul)(x + 4 * b, x + 4 * b, s);
        F(fr_mul)(s_hi, s, gm);
        F(fr_mul)(x + 4 * (b + m), x + 4 * (b + m), s_hi);
        F(fr_mul)(s, s, g);
    }
}

/* One transform by the tp threads of a group (this is thread k): src -> dst, natural order in and
 * out; mode MODE_COSET scales output i by c * g^i. Ends on the group's barrier. */
static void F(transform)(const struct h_ctx *x, pthread_barrier_t *bar, int k, u64 *dst,
                         const u64 *src, int inverse, int mode, const u64 c[4], const u64 g[4]) {
    const int log_n = x->log_n, log_t = x->log_tp;
    const int log_block = log_n - (log_t > 1 ? log_t : 1);
    const size_t n = (size_t)1 << log_n, chunk = n >> log_t;
    const size_t bchunk = (n >> 1) >> log_t;
    F(phase_local)(dst, src, x->tw, log_n, inverse, log_block, k * chunk, (k + 1) * chunk);
    pthread_barrier_wait(bar);
    for (int log_m = log_block; log_m < log_n - 1; log_m++) {
        F(bfly_range)(dst, x->tw, log_n, inverse, log_m, k * bchunk, (k + 1) * bchunk);
        pthread_barrier_wait(bar);
    }
    size_t lo = k * bchunk;
    u64 s0[4], gm[4];
    if (mode == MODE_COSET) {
        F(fr_pow)(s0, g, lo);
        F(fr_mul)(s0, s0, c);
        F(fr_pow)(gm, g, n >> 1);
    }
    F(phase_last)(dst, x->tw, log_n, inverse, lo, lo + bchunk, mode, s0, g, gm);
    pthread_barrier_wait(bar);
}

/* Thread id of groups x tp: the twiddles (a share), then its group's polynomials (odd-coset
 * evaluations: inverse NTT with the coset shift, then forward NTT), then a share of the join
 * out = from_mont(A * B - C). */
static void *F(h_worker)(void *arg) {
    const struct worker *w = arg;
    struct h_ctx *x = w->ctx;
    const int id = w->id, threads = x->groups * x->tp;
    const int gid = id / x->tp, k = id % x->tp;
    const size_t n = (size_t)1 << x->log_n, half = n >> 1;
    size_t lo = half * id / threads, hi = half * (id + 1) / threads;
    if (lo < hi) {
        u64 p[4];
        F(fr_pow)(p, x->w, lo);
        for (size_t j = lo; j < hi; j++) {
            memcpy(x->tw + 4 * j, p, 32);
            F(fr_mul)(p, p, x->w);
        }
    }
    pthread_barrier_wait(&x->all);
    for (int poly = gid; poly < 3; poly += x->groups) {
        F(transform)(x, &x->group[gid], k, x->scratch[gid], x->in[poly], 1, MODE_COSET, x->n_inv,
                     x->coset);
        F(transform)(x, &x->group[gid], k, x->out[poly], x->scratch[gid], 0, MODE_NONE, x->n_inv,
                     x->coset);
    }
    pthread_barrier_wait(&x->all);
    static const u64 one[4] = {1, 0, 0, 0};
    u64 t[4];
    lo = n * id / threads;
    hi = n * (id + 1) / threads;
    for (size_t i = lo; i < hi; i++) {
        F(fr_mul)(t, x->out[0] + 4 * i, x->out[1] + 4 * i);
        F(fr_sub)(t, t, x->out[2] + 4 * i);
        F(fr_mul)(x->out[0] + 4 * i, t, one); /* from Montgomery form */
    }
    return NULL;
}

#undef F
