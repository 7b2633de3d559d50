/* cuzk's CPU QAP steps for BLS12-381 Fr (snarkjs groth16_prove's buildABC1 and joinABC with its
 * six NTTs), so a CPU proof needs no numba: the same results, bit for bit, as kernels/qap.py.
 * Arrays are (n, 8) uint32 Montgomery as the zkey stores Fr, read as 4 x 64-bit limbs (little-
 * endian). The GIL is released while the threads run. Compiled for the portable and the BMI2/ADX
 * paths like msm.c; the caller's `fast` flag (the prover's field_arith) picks one. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"

static const u64 FR_P[4] = {0xffffffff00000001ULL, 0x53bda402fffe5bfeULL, 0x3339d80809a1d805ULL,
                            0x73eda753299d7d48ULL};
static const u64 FR_ONE[4] = {0x00000001fffffffeULL, 0x5884b7fa00034802ULL,
                              0x998c4fefecbc4ff5ULL, 0x1824b159acc5056fULL}; /* R mod r */
static const u64 FR_INV = 0xfffffffeffffffffULL; /* -r^-1 mod 2^64 */

#define CACHE_LOG 12 /* sub-blocks of 2^12 elements (128 KiB) go through their stages in L2 */
#define MODE_NONE 0
#define MODE_COSET 2
#define MAX_THREADS 64

static inline size_t bitrev(size_t i, int log_n) {
    uint32_t v = (uint32_t)i;
    v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
    v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
    v = ((v >> 4) & 0x0f0f0f0fu) | ((v & 0x0f0f0f0fu) << 4);
    v = __builtin_bswap32(v);
    return (size_t)(v >> (32 - log_n));
}

struct worker {
    void *ctx;
    int id;
};

struct abc_ctx {
    const uint32_t *matrix, *constraint, *signal;
    const u64 *values, *witness;
    size_t m, n;
    u64 *a, *b, *c;
    int threads;
};

struct h_ctx {
    int log_n, log_tp, groups, tp;
    const u64 *in[3];
    u64 *out[3];      /* out[0] is the caller's result buffer; the join writes it in place */
    u64 *scratch[3];  /* one per group: the inverse transform's output */
    u64 *tw;          /* w^j, j < n/2 */
    u64 w[4], n_inv[4], coset[4];
    pthread_barrier_t all, group[3];
};

/* ---- portable path ---- */
#define ARCH _portable
#include "fr_tmpl.h"
#undef ARCH

/* ---- BMI2/ADX path ---- */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_FAST_PATH 1
#pragma GCC push_options
#pragma GCC target("bmi2,adx")
#include "arith_adx.h"
#include "fr_mulx_asm.h"
#define FR_MUL_ASM fr_mul_mulx
#define ARCH _adx
#include "fr_tmpl.h"
#undef ARCH
#undef FR_MUL_ASM
#pragma GCC pop_options
#else
#define HAVE_FAST_PATH 0
#endif

/* The threads of one call wait at a gate until all of them exist, so that when one cannot be
 * started the others leave without entering the kernels' barriers (which would never open). */
struct gate {
    pthread_mutex_t lock;
    pthread_cond_t open;
    int state; /* 0 closed, 1 run, -1 abort */
    void *(*fn)(void *);
};

struct gated {
    struct gate *gate;
    struct worker w;
};

static void *gated_run(void *arg) {
    struct gated *g = arg;
    pthread_mutex_lock(&g->gate->lock);
    while (g->gate->state == 0) pthread_cond_wait(&g->gate->open, &g->gate->lock);
    int run = g->gate->state == 1;
    pthread_mutex_unlock(&g->gate->lock);
    if (run) g->gate->fn(&g->w);
    return NULL;
}

/* Runs fn on `threads` threads (this one among them) with ids 0..threads-1; -1 (and no work
 * done) when a thread cannot be started. */
static int run_threads(void *(*fn)(void *), void *ctx, int threads) {
    pthread_t tid[MAX_THREADS];
    struct gated w[MAX_THREADS];
    struct gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, fn};
    for (int i = 0; i < threads; i++) {
        w[i].gate = &gate;
        w[i].w.ctx = ctx;
        w[i].w.id = i;
    }
    int started = 1;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, gated_run, &w[started]) != 0) break;
    pthread_mutex_lock(&gate.lock);
    gate.state = started == threads ? 1 : -1;
    pthread_cond_broadcast(&gate.open);
    pthread_mutex_unlock(&gate.lock);
    if (gate.state == 1) fn(&w[0].w);
    for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
    return gate.state == 1 ? 0 : -1;
}

/* A C-contiguous buffer of whole (n, 8) uint32 rows: its row count, or -1 with an error set. */
static Py_ssize_t rows_of(const Py_buffer *b, const char *name) {
    if (b->len % 32 != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of Fr rows", name,
                     b->len);
        return -1;
    }
    if (((uintptr_t)b->buf % 8) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: buffer is not 8-byte aligned", name);
        return -1;
    }
    return b->len / 32;
}

/* first_unreduced(rows) -> index of the first element >= r, or -1. */
static PyObject *py_first_unreduced(PyObject *self, PyObject *args) {
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = rows_of(&b, "rows");
    long long bad = -1;
    if (n >= 0) {
        const u64 *x = b.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n && bad < 0; i++) {
            const u64 *e = x + 4 * i;
            int below = 0;
            for (int j = 3; j >= 0; j--) {
                if (e[j] != FR_P[j]) {
                    below = e[j] < FR_P[j];
                    break;
                }
            }
            if (!below) bad = i;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&b);
    return n < 0 ? NULL : PyLong_FromLongLong(bad);
}

/* build_abc(matrix, constraint, signal, values, witness, a, b, c, threads, fast): a, b zeroed
 * and c of n rows, filled in place. Indices and values must be checked by the caller. */
static PyObject *py_build_abc(PyObject *self, PyObject *args) {
    PyObject *o[8];
    int threads, fast;
    if (!PyArg_ParseTuple(args, "OOOOOOOOii", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &threads, &fast))
        return NULL;
    Py_buffer b[8];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 8; got++) {
        int flags = got >= 5 ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(o[got], &b[got], flags) < 0) goto done;
    }
    size_t m = (size_t)b[0].len / 4;
    Py_ssize_t nv = rows_of(&b[3], "values"), nw = rows_of(&b[4], "witness");
    Py_ssize_t na = rows_of(&b[5], "a"), nb = rows_of(&b[6], "b"), nc = rows_of(&b[7], "c");
    if (nv < 0 || nw < 0 || na < 0 || nb < 0 || nc < 0) goto done;
    if ((size_t)b[1].len != 4 * m || (size_t)b[2].len != 4 * m || (size_t)nv != m ||
        na != nb || na != nc) {
        PyErr_SetString(PyExc_ValueError, "coefficient arrays have different lengths");
        goto done;
    }
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    struct abc_ctx x = {b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[4].buf, m, (size_t)na,
                        b[5].buf, b[6].buf, b[7].buf, threads};
    void *(*fn)(void *) = abc_worker_portable;
#if HAVE_FAST_PATH
    if (fast && cpu_has_fast()) fn = abc_worker_adx;
#endif
    (void)fast;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_threads(fn, &x, threads);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot start QAP threads");
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return result;
}

/* h_evaluations(a, b, c, out, log_n, consts, groups, tp, fast): out = (A*B - C) on the odd
 * coset, normal form. consts: 96 bytes, Montgomery w_n, n^-1, coset shift. groups (1..3)
 * groups of tp threads (a power of two, at most n/2) each transform whole polynomials. */
static PyObject *py_h_evaluations(PyObject *self, PyObject *args) {
    PyObject *o[4];
    int log_n, groups, tp, fast;
    Py_buffer consts;
    if (!PyArg_ParseTuple(args, "OOOOiy*iii", &o[0], &o[1], &o[2], &o[3], &log_n, &consts,
                          &groups, &tp, &fast))
        return NULL;
    Py_buffer b[4];
    int got = 0;
    PyObject *result = NULL;
    void *mem = NULL;
    for (; got < 4; got++) {
        int flags = got == 3 ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(o[got], &b[got], flags) < 0) goto done;
    }
    if (log_n < 1 || log_n > 28) {
        PyErr_Format(PyExc_ValueError, "NTT size 2^%d outside 2^1..2^28", log_n);
        goto done;
    }
    const size_t n = (size_t)1 << log_n;
    static const char *names[4] = {"a", "b", "c", "out"};
    for (int i = 0; i < 4; i++) {
        Py_ssize_t rows = rows_of(&b[i], names[i]);
        if (rows < 0) goto done;
        if ((size_t)rows != n) {
            PyErr_Format(PyExc_ValueError, "%s has %zd rows, expected 2^%d", names[i], rows,
                         log_n);
            goto done;
        }
    }
    int log_tp = 0;
    while ((1 << log_tp) < tp) log_tp++;
    if (consts.len != 96 || groups < 1 || groups > 3 || tp < 1 || (1 << log_tp) != tp ||
        log_tp > log_n - 1 || groups * tp > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "bad H plan: %d groups of %d threads, %zd constant bytes",
                     groups, tp, consts.len);
        goto done;
    }
    /* twiddles (n/2), B's and C's odd-coset values, one scratch per group */
    mem = PyMem_RawMalloc(32 * (n / 2 + (2 + (size_t)groups) * n));
    if (mem == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    struct h_ctx x;
    memset(&x, 0, sizeof x);
    x.log_n = log_n;
    x.log_tp = log_tp;
    x.groups = groups;
    x.tp = tp;
    for (int i = 0; i < 3; i++) x.in[i] = b[i].buf;
    x.tw = mem;
    x.out[0] = b[3].buf;
    x.out[1] = x.tw + 4 * (n / 2);
    x.out[2] = x.out[1] + 4 * n;
    for (int g = 0; g < groups; g++) x.scratch[g] = x.out[2] + 4 * n * (size_t)(g + 1);
    memcpy(x.w, consts.buf, 32);
    memcpy(x.n_inv, (const char *)consts.buf + 32, 32);
    memcpy(x.coset, (const char *)consts.buf + 64, 32);
    pthread_barrier_init(&x.all, NULL, (unsigned)(groups * tp));
    for (int g = 0; g < groups; g++) pthread_barrier_init(&x.group[g], NULL, (unsigned)tp);
    void *(*fn)(void *) = h_worker_portable;
#if HAVE_FAST_PATH
    if (fast && cpu_has_fast()) fn = h_worker_adx;
#endif
    (void)fast;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_threads(fn, &x, groups * tp);
    Py_END_ALLOW_THREADS
    pthread_barrier_destroy(&x.all);
    for (int g = 0; g < groups; g++) pthread_barrier_destroy(&x.group[g]);
    if (rc < 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot start QAP threads");
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_RawFree(mem);
    PyBuffer_Release(&consts);
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"first_unreduced", py_first_unreduced, METH_VARARGS,
     "first_unreduced(rows) -> index of the first Fr element >= r, or -1"},
    {"build_abc", py_build_abc, METH_VARARGS,
     "build_abc(matrix, constraint, signal, values, witness, a, b, c, threads, fast)"},
    {"h_evaluations", py_h_evaluations, METH_VARARGS,
     "h_evaluations(a, b, c, out, log_n, consts, groups, tp, fast): H's scalars into out"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_qap",
                                    "Native BLS12-381 Fr QAP steps (buildABC1, joinABC, NTTs)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__qap(void) { return PyModule_Create(&module); }
