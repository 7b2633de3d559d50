/* Pippenger MSM over one group (G1 over Fp or G2 over Fp2, both y^2 = x^3 + b), included with
 * ARCH, CURVE (g1/g2), FEPFX (fp_/fp2_) and NW (limbs per coordinate: 6 or 12) defined.
 *
 * Buckets are batch-affine (bucket_tmpl.h) where a pass is large enough, else in XYZZ
 * coordinates (x = X/ZZ, y = Y/ZZZ: adding an affine key point costs 8 multiplications and 2
 * squarings, no inversion); sums and results are XYZZ. Scalars are cut in signed c-bit digits,
 * so a window has 2^(c-1) buckets and a negative digit adds the point with y negated. */

#define FE(name) XCAT(XCAT(FEPFX, name), ARCH)
#define G(name) XCAT(XCAT(CURVE, name), ARCH)
#define PT G(_xyzz)

typedef struct {
    u64 x[NW], y[NW], zz[NW], zzz[NW];
} PT;

static inline int G(_is_inf)(const PT *p) { return FE(is_zero)(p->zz); }

static inline void G(_set_inf)(PT *p) { memset(p, 0, sizeof *p); }

static inline void G(_one)(u64 r[NW]) {
    memset(r, 0, NW * sizeof(u64));
    memcpy(r, FP_ONE, 6 * sizeof(u64));
}

/* r = 2p (dbl-2008-s-1, a = 0); r may be p. */
static void G(_dbl)(PT *r, const PT *p) {
    if (G(_is_inf)(p)) {
        G(_set_inf)(r);
        return;
    }
    u64 u[NW], v[NW], w[NW], s[NW], m[NW], t[NW], x3[NW];
    FE(dbl)(u, p->y);
    FE(sqr)(v, u);
    FE(mul)(w, u, v);
    FE(mul)(s, p->x, v);
    FE(sqr)(t, p->x);
    FE(dbl)(m, t);
    FE(add)(m, m, t);
    FE(sqr)(x3, m);
    FE(dbl)(t, s);
    FE(sub)(x3, x3, t);
    FE(sub)(t, s, x3);
    FE(mul)(t, m, t);
    FE(mul)(u, w, p->y);
    FE(sub)(r->y, t, u);
    memcpy(r->x, x3, sizeof x3);
    FE(mul)(r->zz, v, p->zz);
    FE(mul)(r->zzz, w, p->zzz);
}

/* r = 2(ax, ay) for an affine point. */
static void G(_dbl_affine)(PT *r, const u64 ax[NW], const u64 ay[NW]) {
    PT p;
    memcpy(p.x, ax, sizeof p.x);
    memcpy(p.y, ay, sizeof p.y);
    G(_one)(p.zz);
    G(_one)(p.zzz);
    G(_dbl)(r, &p);
}

/* r += (ax, ay), an affine point not at infinity (madd-2008-s). */
static void G(_madd)(PT *r, const u64 ax[NW], const u64 ay[NW]) {
    if (G(_is_inf)(r)) {
        memcpy(r->x, ax, sizeof r->x);
        memcpy(r->y, ay, sizeof r->y);
        G(_one)(r->zz);
        G(_one)(r->zzz);
        return;
    }
    u64 p2[NW], s2[NW], pp[NW], ppp[NW], q[NW], rr[NW], t[NW];
    FE(mul)(p2, ax, r->zz);
    FE(mul)(s2, ay, r->zzz);
    FE(sub)(p2, p2, r->x); /* P */
    FE(sub)(rr, s2, r->y); /* R */
    if (FE(is_zero)(p2)) {
        if (FE(is_zero)(rr))
            G(_dbl_affine)(r, ax, ay);
        else
            G(_set_inf)(r);
        return;
    }
    FE(sqr)(pp, p2);
    FE(mul)(ppp, p2, pp);
    FE(mul)(q, r->x, pp);
    FE(sqr)(t, rr);
    FE(sub)(t, t, ppp);
    FE(sub)(t, t, q);
    FE(sub)(r->x, t, q); /* X3 = R^2 - PPP - 2Q */
    FE(sub)(q, q, r->x);
    FE(mul)(q, rr, q);
    FE(mul)(t, r->y, ppp);
    FE(sub)(r->y, q, t); /* Y3 = R(Q - X3) - Y1 PPP */
    FE(mul)(r->zz, r->zz, pp);
    FE(mul)(r->zzz, r->zzz, ppp);
}

/* r += p, both XYZZ (add-2008-s). */
static void G(_add)(PT *r, const PT *p) {
    if (G(_is_inf)(p)) return;
    if (G(_is_inf)(r)) {
        *r = *p;
        return;
    }
    u64 u1[NW], u2[NW], s1[NW], s2[NW], pp[NW], ppp[NW], q[NW], t[NW];
    FE(mul)(u1, r->x, p->zz);
    FE(mul)(u2, p->x, r->zz);
    FE(mul)(s1, r->y, p->zzz);
    FE(mul)(s2, p->y, r->zzz);
    FE(sub)(u2, u2, u1); /* P */
    FE(sub)(s2, s2, s1); /* R */
    if (FE(is_zero)(u2)) {
        if (FE(is_zero)(s2))
            G(_dbl)(r, r);
        else
            G(_set_inf)(r);
        return;
    }
    FE(sqr)(pp, u2);
    FE(mul)(ppp, u2, pp);
    FE(mul)(q, u1, pp);
    FE(sqr)(t, s2);
    FE(sub)(t, t, ppp);
    FE(sub)(t, t, q);
    FE(sub)(r->x, t, q);
    FE(sub)(q, q, r->x);
    FE(mul)(q, s2, q);
    FE(mul)(t, s1, ppp);
    FE(sub)(r->y, q, t);
    FE(mul)(r->zz, r->zz, p->zz);
    FE(mul)(r->zz, r->zz, pp);
    FE(mul)(r->zzz, r->zzz, p->zzz);
    FE(mul)(r->zzz, r->zzz, ppp);
}

#include "bucket_tmpl.h"

/* One window: bucket accumulation over the active rows, then the running sum. */
static void G(_window)(PT *out, G(_acc) *acc, const int32_t *digits, const uint32_t *rows,
                       size_t m, const unsigned char *points) {
    G(_acc_begin)(acc, m);
    G(_acc_run)(acc, points, digits, rows, m, 0);
    G(_acc_reduce)(acc, out);
}

typedef struct {
    const int32_t *digits;
    const uint32_t *rows;
    size_t m;
    const unsigned char *points;
    PT *results;
    int windows;
    int c;
    atomic_int next;
    atomic_int failed;
} G(_job);

static void *G(_worker)(void *arg) {
    G(_job) *job = (G(_job) *)arg;
    G(_acc) acc;
    if (G(_acc_init)(&acc, (size_t)1 << (job->c - 1)) < 0) {
        atomic_store(&job->failed, 1);
        return NULL;
    }
    for (;;) {
        int w = atomic_fetch_add(&job->next, 1);
        if (w >= job->windows) break;
        G(_window)(&job->results[w], &acc, job->digits + (size_t)w * job->m, job->rows, job->m,
                   job->points);
    }
    G(_acc_free)(&acc);
    return NULL;
}

/* sum(scalar_i * point_i). points: n rows of affine (x, y) Montgomery coordinates, all zero
 * for infinity; scalars: n rows of 4 little-endian limbs below 2^255. Writes the affine result
 * in normal form to out (2 * NW limbs) and returns 1, or returns 0 for infinity; -1 when out of
 * memory, -2 for a scalar of 2^255 or more. threads > 1 splits the windows among threads. */
static int G(_msm)(const unsigned char *points, const u64 *scalars, size_t n, int threads,
                   u64 *out) {
    uint32_t *rows = (uint32_t *)PyMem_RawMalloc((n ? n : 1) * sizeof(uint32_t));
    if (rows == NULL) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const u64 *s = scalars + 4 * i;
        if (s[3] >> 63) {
            PyMem_RawFree(rows);
            return -2;
        }
        if ((s[0] | s[1] | s[2] | s[3]) == 0) continue;
        const unsigned char *pt = points + i * (2 * NW * 8);
        int zero = 1;
        for (size_t j = 0; j < 2 * NW * 8; j++) {
            if (pt[j]) {
                zero = 0;
                break;
            }
        }
        if (!zero) rows[m++] = (uint32_t)i;
    }
    if (m == 0) {
        PyMem_RawFree(rows);
        return 0;
    }
    int c = pick_window(m, threads);
    int windows = (256 + c - 1) / c;
    int32_t *digits = (int32_t *)PyMem_RawMalloc((size_t)windows * m * sizeof(int32_t));
    PT *results = (PT *)PyMem_RawMalloc((size_t)windows * sizeof(PT));
    if (digits == NULL || results == NULL) {
        PyMem_RawFree(rows);
        PyMem_RawFree(digits);
        PyMem_RawFree(results);
        return -1;
    }
    signed_digits(scalars, rows, m, c, windows, digits);
    G(_job) job = {digits, rows, m, points, results, windows, c, 0, 0};
    int extra = threads - 1;
    if (extra > windows - 1) extra = windows - 1;
    pthread_t tids[64];
    int started = 0;
    for (; started < extra && started < 64; started++) {
        if (pthread_create(&tids[started], NULL, G(_worker), &job) != 0) break;
    }
    G(_worker)(&job);
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
    PyMem_RawFree(digits);
    PyMem_RawFree(rows);
    if (atomic_load(&job.failed)) {
        PyMem_RawFree(results);
        return -1;
    }
    PT total = results[windows - 1];
    for (int w = windows - 2; w >= 0; w--) {
        for (int k = 0; k < c; k++) G(_dbl)(&total, &total);
        G(_add)(&total, &results[w]);
    }
    PyMem_RawFree(results);
    if (G(_is_inf)(&total)) return 0;
    u64 zzinv[NW], zzzinv[NW], x[NW], y[NW];
    FE(inv)(zzinv, total.zz);
    FE(inv)(zzzinv, total.zzz);
    FE(mul)(x, total.x, zzinv);
    FE(mul)(y, total.y, zzzinv);
    FE(from_mont)(out, x);
    FE(from_mont)(out + NW, y);
    return 1;
}

/* ---- precomputed window tables ----
 * A table of t copies of a section, copy j holding 2^(j*s*c) * P for every key point P (copy 0
 * is the section itself, the others are built once at key load), lets t windows share one
 * bucket pass: the W = ceil(256/c) windows become s = ceil(W/t) passes, each paying one bucket
 * reduction and c doublings instead of t of each. */

static inline int G(_row_zero)(const unsigned char *pt) {
    for (size_t j = 0; j < 2 * NW * 8; j++)
        if (pt[j]) return 0;
    return 1;
}

/* Batch-normalise cnt XYZZ points to affine Montgomery rows (all zero for infinity) with one
 * inversion (Montgomery's trick over the ZZ and ZZZ of every point). scratch: 2 * cnt * NW. */
static void G(_normalize)(const PT *pts, size_t cnt, unsigned char *out, size_t stride,
                          u64 *scratch) {
    u64 acc[NW], inv[NW], t[NW];
    G(_one)(acc);
    for (size_t i = 0; i < cnt; i++) {
        for (int h = 0; h < 2; h++) {
            const u64 *z = h ? pts[i].zzz : pts[i].zz;
            memcpy(scratch + (2 * i + h) * NW, acc, sizeof acc);
            if (!FE(is_zero)(z)) FE(mul)(acc, acc, z);
        }
    }
    FE(inv)(inv, acc);
    for (size_t i = cnt; i-- > 0;) {
        u64 zinv[2][NW];
        for (int h = 1; h >= 0; h--) {
            const u64 *z = h ? pts[i].zzz : pts[i].zz;
            if (FE(is_zero)(z)) {
                memset(zinv[h], 0, sizeof zinv[h]);
                continue;
            }
            FE(mul)(zinv[h], inv, scratch + (2 * i + h) * NW);
            FE(mul)(inv, inv, z);
        }
        unsigned char *row = out + i * stride;
        if (G(_is_inf)(&pts[i])) {
            memset(row, 0, 2 * NW * 8);
            continue;
        }
        FE(mul)(t, pts[i].x, zinv[0]);
        memcpy(row, t, sizeof t);
        FE(mul)(t, pts[i].y, zinv[1]);
        memcpy(row + sizeof t, t, sizeof t);
    }
}

#define TAB_CHUNK 256

typedef struct {
    const unsigned char *points;
    unsigned char *out;
    size_t n;
    int t;
    int shift;
    atomic_size_t next;
    atomic_int failed;
} G(_fill_job);

static void *G(_fill_worker)(void *arg) {
    G(_fill_job) *job = (G(_fill_job) *)arg;
    const size_t rowb = 2 * NW * 8, copies = (size_t)job->t - 1;
    PT *tmp = (PT *)PyMem_RawMalloc(TAB_CHUNK * copies * sizeof(PT));
    u64 *scratch = (u64 *)PyMem_RawMalloc(2 * TAB_CHUNK * copies * NW * sizeof(u64));
    if (tmp == NULL || scratch == NULL) {
        atomic_store(&job->failed, 1);
        PyMem_RawFree(tmp);
        PyMem_RawFree(scratch);
        return NULL;
    }
    u64 ax[NW], ay[NW];
    for (;;) {
        size_t lo = atomic_fetch_add(&job->next, TAB_CHUNK);
        if (lo >= job->n) break;
        size_t hi = lo + TAB_CHUNK < job->n ? lo + TAB_CHUNK : job->n;
        for (size_t i = lo; i < hi; i++) {
            const unsigned char *pt = job->points + i * rowb;
            PT acc;
            if (G(_row_zero)(pt)) {
                G(_set_inf)(&acc);
            } else {
                memcpy(ax, pt, sizeof ax);
                memcpy(ay, pt + sizeof ax, sizeof ay);
                memcpy(acc.x, ax, sizeof ax);
                memcpy(acc.y, ay, sizeof ay);
                G(_one)(acc.zz);
                G(_one)(acc.zzz);
            }
            for (size_t j = 0; j < copies; j++) {
                for (int k = 0; k < job->shift; k++) G(_dbl)(&acc, &acc);
                tmp[j * TAB_CHUNK + (i - lo)] = acc;
            }
        }
        for (size_t j = 0; j < copies; j++)
            G(_normalize)(tmp + j * TAB_CHUNK, hi - lo, job->out + (j * job->n + lo) * rowb,
                          rowb, scratch);
    }
    PyMem_RawFree(tmp);
    PyMem_RawFree(scratch);
    return NULL;
}

/* Fill out ((t - 1) * n rows) with copies 1..t-1 of the n points: copy j row i = 2^(j*shift)
 * * P_i. Returns 0, or -1 when out of memory. */
static int G(_table_fill)(const unsigned char *points, size_t n, int t, int shift,
                          unsigned char *out, int threads) {
    if (t < 2 || n == 0) return 0;
    G(_fill_job) job = {points, out, n, t, shift, 0, 0};
    pthread_t tids[64];
    int started = 0;
    for (; started < threads - 1 && started < 64; started++)
        if (pthread_create(&tids[started], NULL, G(_fill_worker), &job) != 0) break;
    G(_fill_worker)(&job);
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    return atomic_load(&job.failed) ? -1 : 0;
}

typedef struct {
    const int32_t *digits;
    const uint32_t *rows;
    size_t m, n;
    const unsigned char *points, *table;
    PT *results;
    int windows, c, t, s, groups;
    atomic_int next;
    atomic_int failed;
} G(_tab_job);

static void *G(_tab_worker)(void *arg) {
    G(_tab_job) *job = (G(_tab_job) *)arg;
    const size_t rowb = 2 * NW * 8;
    G(_acc) acc;
    if (G(_acc_init)(&acc, (size_t)1 << (job->c - 1)) < 0) {
        atomic_store(&job->failed, 1);
        return NULL;
    }
    for (;;) {
        int u = atomic_fetch_add(&job->next, 1);
        if (u >= job->s * job->groups) break;
        int pass = u / job->groups, g = u % job->groups;
        int j0 = (int)((long)g * job->t / job->groups);
        int j1 = (int)((long)(g + 1) * job->t / job->groups);
        G(_acc_begin)(&acc, job->m * (size_t)(j1 - j0));
        for (int j = j0; j < j1; j++) {
            int w = j * job->s + pass;
            if (w >= job->windows) break;
            const unsigned char *base =
                j == 0 ? job->points : job->table + (size_t)(j - 1) * job->n * rowb;
            /* copies j > 0 may hold infinity (2^k P = O): skipped there */
            G(_acc_run)(&acc, base, job->digits + (size_t)w * job->m, job->rows, job->m, j > 0);
        }
        G(_acc_reduce)(&acc, &job->results[u]);
    }
    G(_acc_free)(&acc);
    return NULL;
}

/* Active rows: nonzero scalar and point not at infinity. Returns m, or -2 for a scalar of
 * 2^255 or more. */
static long long G(_active)(const unsigned char *points, const u64 *scalars, size_t n,
                            uint32_t *rows) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const u64 *s = scalars + 4 * i;
        if (s[3] >> 63) return -2;
        if ((s[0] | s[1] | s[2] | s[3]) == 0) continue;
        if (!G(_row_zero)(points + i * (2 * NW * 8))) rows[m++] = (uint32_t)i;
    }
    return (long long)m;
}

/* Writes the affine normal-form result of an XYZZ point; 0 for infinity, else 1. */
static int G(_to_affine_out)(const PT *total, u64 *out) {
    if (G(_is_inf)(total)) return 0;
    u64 zzinv[NW], zzzinv[NW], x[NW], y[NW];
    FE(inv)(zzinv, total->zz);
    FE(inv)(zzzinv, total->zzz);
    FE(mul)(x, total->x, zzinv);
    FE(mul)(y, total->y, zzzinv);
    FE(from_mont)(out, x);
    FE(from_mont)(out + NW, y);
    return 1;
}

/* As G(_msm), with the table of t copies built for window width c (G(_table_fill) with shift
 * s * c). threads > 1 splits each pass's copies among threads (each with its own buckets). */
static int G(_msm_tab)(const unsigned char *points, const unsigned char *table, int t, int c,
                       const u64 *scalars, size_t n, int threads, u64 *out) {
    uint32_t *rows = (uint32_t *)PyMem_RawMalloc((n ? n : 1) * sizeof(uint32_t));
    if (rows == NULL) return -1;
    long long active = G(_active)(points, scalars, n, rows);
    if (active <= 0) {
        PyMem_RawFree(rows);
        return active == -2 ? -2 : 0;
    }
    size_t m = (size_t)active;
    int windows = (256 + c - 1) / c;
    int s = (windows + t - 1) / t;
    int groups = threads <= s ? 1 : (threads + s - 1) / s;
    if (groups > t) groups = t;
    int32_t *digits = (int32_t *)PyMem_RawMalloc((size_t)windows * m * sizeof(int32_t));
    PT *results = (PT *)PyMem_RawMalloc((size_t)s * groups * sizeof(PT));
    if (digits == NULL || results == NULL) {
        PyMem_RawFree(rows);
        PyMem_RawFree(digits);
        PyMem_RawFree(results);
        return -1;
    }
    signed_digits(scalars, rows, m, c, windows, digits);
    G(_tab_job) job = {digits, rows, m, n, points, table, results, windows, c, t, s, groups, 0, 0};
    int units = s * groups, extra = threads - 1;
    if (extra > units - 1) extra = units - 1;
    pthread_t tids[64];
    int started = 0;
    for (; started < extra && started < 64; started++)
        if (pthread_create(&tids[started], NULL, G(_tab_worker), &job) != 0) break;
    G(_tab_worker)(&job);
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    PyMem_RawFree(digits);
    PyMem_RawFree(rows);
    if (atomic_load(&job.failed)) {
        PyMem_RawFree(results);
        return -1;
    }
    PT total;
    G(_set_inf)(&total);
    for (int p = s - 1; p >= 0; p--) {
        if (p < s - 1)
            for (int k = 0; k < c; k++) G(_dbl)(&total, &total);
        for (int g = 0; g < groups; g++) G(_add)(&total, &results[p * groups + g]);
    }
    PyMem_RawFree(results);
    return G(_to_affine_out)(&total, out);
}

/* The first row that is not infinity (all zero) and not an affine point of the curve (each
 * coordinate reduced, y^2 = x^3 + b), or -1 when every row is. */
static long long G(_first_bad)(const unsigned char *points, size_t n) {
    u64 b[NW];
    memset(b, 0, sizeof b);
    memcpy(b, FP_B_MONT, 6 * sizeof(u64));
    if (NW == 12) memcpy(b + 6, FP_B_MONT, 6 * sizeof(u64)); /* G2: b = 4(1 + u) */
    u64 x[NW], y[NW], l[NW], r[NW];
    for (size_t i = 0; i < n; i++) {
        const unsigned char *pt = points + i * (2 * NW * 8);
        memcpy(x, pt, sizeof x);
        memcpy(y, pt + sizeof x, sizeof y);
        if (FE(is_zero)(x) && FE(is_zero)(y)) continue;
        for (int k = 0; k < NW; k += 6) {
            if (!fp_reduced(x + k) || !fp_reduced(y + k)) return (long long)i;
        }
        FE(sqr)(l, y);
        FE(sqr)(r, x);
        FE(mul)(r, r, x);
        FE(add)(r, r, b);
        FE(sub)(l, l, r);
        if (!FE(is_zero)(l)) return (long long)i;
    }
    return -1;
}

#undef PT
#undef G
#undef FE
