/* Bucket accumulation for one Pippenger pass, included by curve_tmpl.h (PT, G, FE, NW defined).
 *
 * Batch-affine: buckets are affine points. Additions to distinct buckets are gathered in a batch
 * and their slopes share one field inversion (Montgomery's trick), so one addition costs about
 * 3 multiplications for its share of the inversion plus 2M + 1S, instead of the 8M + 2S of an
 * XYZZ mixed add. A point whose bucket already has an addition in the open batch waits in a
 * deferred list for the next batch; when that list is full (many points for few buckets) or
 * at the end of the pass, a point that still conflicts goes into the bucket's XYZZ "spill"
 * accumulator instead (the old mixed add), so no input makes the pass slower than XYZZ.
 * A pass whose batches would be small (few buckets or few points: bucket_min_batch) uses only
 * the XYZZ buckets.
 *
 * Edge cases, exactly: an empty bucket takes the point as is; a point equal to its bucket is a
 * doubling (slope 3x^2 / 2y), and one with y = 0 empties it (2P = O); a point equal to the
 * negation of its bucket empties it; rows at infinity never get here (skipped by the caller or
 * by skip_inf). Every field element is fully reduced, so equality is equality of limbs. */

#ifndef CUZK_BUCKET_TUNING
#define CUZK_BUCKET_TUNING
#define BUCKET_BATCH_MAX 8192
/* Additions sharing one inversion; 0 turns batching off. Set by _msm.batch_affine (a tuning
 * and test hook); read when a worker starts. */
static int bucket_batch = 1024;
/* The smallest batch worth one inversion, G1 and G2 (measured with benchmarks/bench_msm.py:
 * an Fp inversion costs about 570 Fp multiplications and batching saves about 4 per G1
 * addition, 12 per G2 addition); a smaller pass uses the XYZZ buckets only. */
static int bucket_min_batch[2] = {256, 32};

typedef struct {
    const unsigned char *pt;
    uint32_t b;
    uint32_t neg;
} bucket_item;
#endif

typedef struct {
    size_t nb;         /* buckets */
    u64 *bx, *by;      /* affine buckets, nb * NW limbs each */
    uint8_t *full;     /* the affine bucket holds a point */
    uint32_t *busy;    /* == epoch: the bucket has an addition in the open batch */
    uint32_t epoch;
    PT *spill;         /* XYZZ buckets: additions that were not batched */
    uint32_t *spilled; /* == pass: spill[b] is in use in this pass */
    uint32_t pass;
    int batched; /* this pass batches */
    size_t cap, lim, n; /* allocated entries, entries per batch (this pass), open entries */
    uint32_t *eb;               /* bucket of each entry */
    uint8_t *edbl;              /* entry is a doubling */
    u64 *ex, *ey, *eden, *epre; /* cap * NW: point, slope denominator, prefix product */
    size_t nd;                  /* deferred points (at most lim) */
    bucket_item *def;
} G(_acc);

static void G(_acc_free)(G(_acc) *a) {
    PyMem_RawFree(a->bx);
    PyMem_RawFree(a->by);
    PyMem_RawFree(a->full);
    PyMem_RawFree(a->busy);
    PyMem_RawFree(a->spill);
    PyMem_RawFree(a->spilled);
    PyMem_RawFree(a->eb);
    PyMem_RawFree(a->edbl);
    PyMem_RawFree(a->ex);
    PyMem_RawFree(a->ey);
    PyMem_RawFree(a->eden);
    PyMem_RawFree(a->epre);
    PyMem_RawFree(a->def);
    memset(a, 0, sizeof *a);
}

/* Returns 0, or -1 when out of memory (a is then freed). */
static int G(_acc_init)(G(_acc) *a, size_t nb) {
    memset(a, 0, sizeof *a);
    int cap = bucket_batch;
    if (cap > BUCKET_BATCH_MAX) cap = BUCKET_BATCH_MAX;
    a->nb = nb;
    a->cap = cap > 0 ? (size_t)cap : 0;
    if (a->cap > nb / 2) a->cap = nb / 2 ? nb / 2 : 1; /* a batch never exceeds nb / 2 */
    size_t ce = a->cap ? a->cap : 1, fe = NW * sizeof(u64);
    a->bx = (u64 *)PyMem_RawMalloc(nb * fe);
    a->by = (u64 *)PyMem_RawMalloc(nb * fe);
    a->full = (uint8_t *)PyMem_RawCalloc(nb, 1);
    a->busy = (uint32_t *)PyMem_RawCalloc(nb, sizeof(uint32_t));
    a->spill = (PT *)PyMem_RawMalloc(nb * sizeof(PT));
    a->spilled = (uint32_t *)PyMem_RawCalloc(nb, sizeof(uint32_t));
    a->eb = (uint32_t *)PyMem_RawMalloc(ce * sizeof(uint32_t));
    a->edbl = (uint8_t *)PyMem_RawMalloc(ce);
    a->ex = (u64 *)PyMem_RawMalloc(ce * fe);
    a->ey = (u64 *)PyMem_RawMalloc(ce * fe);
    a->eden = (u64 *)PyMem_RawMalloc(ce * fe);
    a->epre = (u64 *)PyMem_RawMalloc(ce * fe);
    a->def = (bucket_item *)PyMem_RawMalloc(ce * sizeof(bucket_item));
    if (!a->bx || !a->by || !a->full || !a->busy || !a->spill || !a->spilled || !a->eb ||
        !a->edbl || !a->ex || !a->ey || !a->eden || !a->epre || !a->def) {
        G(_acc_free)(a);
        return -1;
    }
    a->epoch = 1;
    return 0;
}

/* Starts a pass of about m additions: every bucket empty. */
static void G(_acc_begin)(G(_acc) *a, size_t m) {
    memset(a->full, 0, a->nb);
    if (++a->pass == 0) {
        memset(a->spilled, 0, a->nb * sizeof(uint32_t));
        a->pass = 1;
    }
    /* k distinct buckets out of nb take about -nb ln(1 - k/nb) points: k <= nb/2 defers about
     * 0.2 nb of them */
    a->lim = a->nb / 2 < a->cap ? a->nb / 2 : a->cap;
    if (a->lim < 1) a->lim = 1;
    size_t fill = a->lim < m ? a->lim : m; /* the batches this pass can fill */
    a->batched = a->cap > 0 && fill >= (size_t)bucket_min_batch[NW == 12];
    a->n = 0;
    a->nd = 0;
}

static inline void G(_acc_spill)(G(_acc) *a, uint32_t b, const u64 x[NW], const u64 y[NW]) {
    if (a->spilled[b] != a->pass) {
        G(_set_inf)(&a->spill[b]);
        a->spilled[b] = a->pass;
    }
    G(_madd)(&a->spill[b], x, y);
}

/* Adds (x, y) to affine bucket b now (empty bucket, cancellation) or as a batch entry.
 * Returns 0 when it cannot: the bucket is in the open batch, or the batch is full. */
static inline int G(_acc_try)(G(_acc) *a, uint32_t b, const u64 x[NW], const u64 y[NW]) {
    if (a->busy[b] == a->epoch) return 0;
    u64 *bx = a->bx + (size_t)b * NW, *by = a->by + (size_t)b * NW;
    if (!a->full[b]) {
        memcpy(bx, x, NW * sizeof(u64));
        memcpy(by, y, NW * sizeof(u64));
        a->full[b] = 1;
        return 1;
    }
    if (a->n == a->lim) return 0;
    size_t i = a->n;
    u64 *den = a->eden + i * NW;
    FE(sub)(den, x, bx);
    if (FE(is_zero)(den)) {
        /* same x: the bucket is P (double it) or -P (cancel) */
        if (memcmp(y, by, NW * sizeof(u64)) != 0 || FE(is_zero)(y)) {
            a->full[b] = 0;
            return 1;
        }
        FE(dbl)(den, y);
        a->edbl[i] = 1;
    } else {
        a->edbl[i] = 0;
    }
    memcpy(a->ex + i * NW, x, NW * sizeof(u64));
    memcpy(a->ey + i * NW, y, NW * sizeof(u64));
    a->eb[i] = b;
    a->busy[b] = a->epoch;
    a->n++;
    return 1;
}

/* Completes the open batch: one inversion for all the slopes. */
static void G(_acc_flush)(G(_acc) *a) {
    size_t n = a->n;
    if (n == 0) return;
    u64 t[NW], inv[NW], l[NW], num[NW], x3[NW];
    G(_one)(t);
    for (size_t i = 0; i < n; i++) {
        memcpy(a->epre + i * NW, t, sizeof t);
        FE(mul)(t, t, a->eden + i * NW);
    }
    FE(inv)(inv, t);
    for (size_t i = n; i-- > 0;) {
        FE(mul)(l, inv, a->epre + i * NW); /* 1 / den_i */
        FE(mul)(inv, inv, a->eden + i * NW);
        u64 *x1 = a->bx + (size_t)a->eb[i] * NW, *y1 = a->by + (size_t)a->eb[i] * NW;
        if (a->edbl[i]) {
            FE(sqr)(num, x1);
            FE(dbl)(t, num);
            FE(add)(num, num, t); /* 3 x^2 */
        } else {
            FE(sub)(num, a->ey + i * NW, y1);
        }
        FE(mul)(l, num, l); /* slope */
        FE(sqr)(x3, l);
        FE(sub)(x3, x3, x1);
        FE(sub)(x3, x3, a->ex + i * NW);
        FE(sub)(t, x1, x3);
        FE(mul)(t, l, t);
        FE(sub)(y1, t, y1);
        memcpy(x1, x3, sizeof x3);
    }
    a->n = 0;
    if (++a->epoch == 0) {
        memset(a->busy, 0, a->nb * sizeof(uint32_t));
        a->epoch = 1;
    }
}

static inline void G(_acc_load)(const bucket_item *it, u64 x[NW], u64 y[NW]) {
    memcpy(x, it->pt, NW * sizeof(u64)); /* the zkey's sections need not be 8-byte aligned */
    memcpy(y, it->pt + NW * sizeof(u64), NW * sizeof(u64));
    if (it->neg) FE(neg)(y, y);
}

/* Retries the deferred points after a flush; one that conflicts again waits (or, when final,
 * goes to its spill bucket). */
static void G(_acc_retry)(G(_acc) *a, int final) {
    size_t keep = 0;
    u64 x[NW], y[NW];
    for (size_t k = 0; k < a->nd; k++) {
        const bucket_item it = a->def[k];
        G(_acc_load)(&it, x, y);
        if (G(_acc_try)(a, it.b, x, y)) continue;
        if (final)
            G(_acc_spill)(a, it.b, x, y);
        else
            a->def[keep++] = it;
    }
    a->nd = keep;
}

/* Adds each row's point times the sign of its digit to bucket |digit| - 1. skip_inf: rows may
 * be at infinity (all zero) and are skipped. */
static void G(_acc_run)(G(_acc) *a, const unsigned char *base, const int32_t *digits,
                        const uint32_t *rows, size_t m, int skip_inf) {
    u64 x[NW], y[NW];
    for (size_t k = 0; k < m; k++) {
        int32_t d = digits[k];
        if (d == 0) continue;
        bucket_item it = {base + (size_t)rows[k] * (2 * NW * 8), 0, d < 0};
        it.b = (uint32_t)(d < 0 ? -d : d) - 1;
        G(_acc_load)(&it, x, y);
        if (skip_inf && FE(is_zero)(x) && FE(is_zero)(y)) continue;
        if (!a->batched) {
            G(_acc_spill)(a, it.b, x, y);
            continue;
        }
        if (!G(_acc_try)(a, it.b, x, y)) {
            if (a->nd < a->lim)
                a->def[a->nd++] = it;
            else
                G(_acc_spill)(a, it.b, x, y);
        }
        while (a->n == a->lim) {
            G(_acc_flush)(a);
            G(_acc_retry)(a, 0);
        }
    }
}

/* Ends the pass: the running sum over the buckets, sum_b (b + 1) * bucket_b, into out. */
static void G(_acc_reduce)(G(_acc) *a, PT *out) {
    if (a->batched) {
        G(_acc_flush)(a);
        G(_acc_retry)(a, 1);
        G(_acc_flush)(a);
    }
    PT sum, total;
    G(_set_inf)(&sum);
    G(_set_inf)(&total);
    for (size_t b = a->nb; b-- > 0;) {
        if (a->full[b]) G(_madd)(&sum, a->bx + b * NW, a->by + b * NW);
        if (a->spilled[b] == a->pass) G(_add)(&sum, &a->spill[b]);
        G(_add)(&total, &sum);
    }
    *out = total;
}
