/* cuzk's CPU multi-scalar multiplication for BLS12-381 (G1 and G2), over the proving key's own
 * point bytes: affine points with Montgomery-form coordinates as the zkey stores them, read in
 * place from the memory-mapped file; the GIL is released for the whole call.
 *
 * The code is compiled twice: a portable path, and one with the BMI2/ADX instructions enabled
 * (the compiler then uses mulx for the 64x64->128 products). The fast path is taken only when
 * the CPU reports both features at run time and the caller does not force the portable one. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arith.h"

static const u64 FP_P[6] = {0xb9feffffffffaaabULL, 0x1eabfffeb153ffffULL, 0x6730d2a0f6b0f624ULL,
                            0x64774b84f38512bfULL, 0x4b1ba7b6434bacd7ULL, 0x1a0111ea397fe69aULL};
static const u64 FP_P_MINUS_2[6] = {0xb9feffffffffaaa9ULL, 0x1eabfffeb153ffffULL,
                                    0x6730d2a0f6b0f624ULL, 0x64774b84f38512bfULL,
                                    0x4b1ba7b6434bacd7ULL, 0x1a0111ea397fe69aULL};
static const u64 FP_ONE[6] = {0x760900000002fffdULL, 0xebf4000bc40c0002ULL, 0x5f48985753c758baULL,
                              0x77ce585370525745ULL, 0x5c071a97a256ec6dULL, 0x15f65ec3fa80e493ULL};
static const u64 FP_B_MONT[6] = {0xaa270000000cfff3ULL, 0x53cc0032fc34000aULL,
                                 0x478fe97a6b0a807fULL, 0xb1d37ebee6ba24d7ULL,
                                 0x8ec9733bbf78ab2fULL, 0x09d645513d83de7eULL}; /* 4, Montgomery */
static const u64 FP_INV = 0x89f3fffcfffcfffdULL; /* -p^-1 mod 2^64 */

static inline int fp_reduced(const u64 a[6]) {
    for (int i = 5; i >= 0; i--) {
        if (a[i] < FP_P[i]) return 1;
        if (a[i] > FP_P[i]) return 0;
    }
    return 0; /* equal to p */
}

/* The window width minimising (windows / threads) * (points + 2 * buckets) additions. */
static int pick_window(size_t m, int threads) {
    if (threads < 1) threads = 1;
    int best = 1;
    double best_cost = 1e300;
    for (int c = 1; c <= 16; c++) {
        int windows = (256 + c - 1) / c;
        int rounds = (windows + threads - 1) / threads;
        double cost = (double)rounds * ((double)m + 2.0 * (double)((size_t)1 << (c - 1)) * 1.4);
        if (cost < best_cost) {
            best_cost = cost;
            best = c;
        }
    }
    return best;
}

/* Signed c-bit digits of each active scalar, window-major (digits[w * m + k]), each in
 * (-2^(c-1), 2^(c-1)]; windows * c >= 256 covers the carry out of a scalar below 2^255. */
static void signed_digits(const u64 *scalars, const uint32_t *rows, size_t m, int c, int windows,
                          int32_t *digits) {
    const int64_t half = (int64_t)1 << (c - 1);
    const int64_t full = (int64_t)1 << c;
    for (size_t k = 0; k < m; k++) {
        const u64 *s = scalars + 4 * (size_t)rows[k];
        int64_t carry = 0;
        for (int w = 0; w < windows; w++) {
            int bit = w * c;
            int64_t v = 0;
            if (bit < 256) {
                int limb = bit >> 6, off = bit & 63;
                u64 lo = s[limb] >> off;
                if (off + c > 64 && limb < 3) lo |= s[limb + 1] << (64 - off);
                v = (int64_t)(lo & (u64)(full - 1));
            }
            v += carry;
            if (v > half) {
                v -= full;
                carry = 1;
            } else {
                carry = 0;
            }
            digits[(size_t)w * m + k] = (int32_t)v;
        }
    }
}

/* ---- portable path ---- */
#define ARCH _portable
#include "msm_arch.h"
#undef ARCH

/* ---- BMI2/ADX path ---- */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_FAST_PATH 1
#pragma GCC push_options
#pragma GCC target("bmi2,adx")
#include "arith_adx.h"
#include "fp_mulx_asm.h"
#define FP_MUL_ASM fp_mul_mulx
#define ARCH _adx
#include "msm_arch.h"
#undef FP_MUL_ASM
#undef ARCH
#pragma GCC pop_options
#else
#define HAVE_FAST_PATH 0
#endif

typedef int (*msm_fn)(const unsigned char *, const u64 *, size_t, int, u64 *);

/* The scalars as 8-byte-aligned words: the caller's buffer when it is aligned, else a copy
 * (*owned, freed by the caller with PyMem_RawFree); NULL with MemoryError set when the copy
 * cannot be made. */
static const u64 *aligned_scalars(const Py_buffer *sc, u64 n, u64 **owned) {
    *owned = NULL;
    if (((uintptr_t)sc->buf % 8) == 0)
        return (const u64 *)sc->buf;
    *owned = (u64 *)PyMem_RawMalloc(n * 32 + 1);
    if (*owned == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(*owned, sc->buf, n * 32);
    return *owned;
}

/* msm(group, points, scalars, threads, fast) -> bytes (x || y, normal form, little-endian) or
 * None for the point at infinity. */
static PyObject *py_msm(PyObject *self, PyObject *args) {
    int group, threads, fast;
    PyObject *pts_obj, *sc_obj;
    if (!PyArg_ParseTuple(args, "iOOii", &group, &pts_obj, &sc_obj, &threads, &fast)) return NULL;
    if (group != 1 && group != 2) {
        PyErr_SetString(PyExc_ValueError, "group must be 1 or 2");
        return NULL;
    }
    const size_t nw = group == 1 ? 6 : 12;
    const size_t row = 2 * nw * 8;
    Py_buffer pts, sc;
    if (PyObject_GetBuffer(pts_obj, &pts, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(sc_obj, &sc, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&pts);
        return NULL;
    }
    PyObject *result = NULL;
    size_t n = (size_t)sc.len / 32;
    if ((size_t)sc.len % 32 != 0 || (size_t)pts.len != n * row) {
        PyErr_Format(PyExc_ValueError, "MSM size mismatch: %zd point bytes, %zd scalar bytes",
                     pts.len, sc.len);
        goto done;
    }
    if (n > 0xffffffffULL) {
        PyErr_SetString(PyExc_ValueError, "MSM too large");
        goto done;
    }
    if (threads > 64) threads = 64;
    u64 *scalars = NULL;
    const u64 *words = aligned_scalars(&sc, n, &scalars);
    if (words == NULL)
        goto done;
    msm_fn fn;
#if HAVE_FAST_PATH
    if (fast && cpu_has_fast())
        fn = group == 1 ? g1_msm_adx : g2_msm_adx;
    else
#endif
        fn = group == 1 ? g1_msm_portable : g2_msm_portable;
    (void)fast;
    u64 out[24];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn((const unsigned char *)pts.buf, words, n, threads, out);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(scalars);
    if (rc == -1) {
        PyErr_NoMemory();
    } else if (rc == -2) {
        PyErr_SetString(PyExc_ValueError, "a scalar is 2^255 or more: not a reduced Fr element");
    } else if (rc == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(2 * nw * 8));
    }
done:
    PyBuffer_Release(&pts);
    PyBuffer_Release(&sc);
    return result;
}

typedef int (*msm_tab_fn)(const unsigned char *, const unsigned char *, int, int, const u64 *,
                          size_t, int, u64 *);
typedef int (*fill_fn)(const unsigned char *, size_t, int, int, unsigned char *, int);

/* msm_tab(group, points, table, t, c, scalars, threads, fast): as msm, with a table of copies
 * 1..t-1 built by table_fill(group, points, table, t, s * c, ...), s = ceil(ceil(256/c) / t). */
static PyObject *py_msm_tab(PyObject *self, PyObject *args) {
    int group, t, c, threads, fast;
    PyObject *pts_obj, *tab_obj, *sc_obj;
    if (!PyArg_ParseTuple(args, "iOOiiOii", &group, &pts_obj, &tab_obj, &t, &c, &sc_obj, &threads,
                          &fast))
        return NULL;
    if (group != 1 && group != 2) {
        PyErr_SetString(PyExc_ValueError, "group must be 1 or 2");
        return NULL;
    }
    if (t < 1 || t > 256 || c < 1 || c > 20) {
        PyErr_Format(PyExc_ValueError, "bad table shape: %d copies, window %d bits", t, c);
        return NULL;
    }
    const size_t nw = group == 1 ? 6 : 12;
    const size_t row = 2 * nw * 8;
    Py_buffer pts, tab, sc;
    if (PyObject_GetBuffer(pts_obj, &pts, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(tab_obj, &tab, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&pts);
        return NULL;
    }
    if (PyObject_GetBuffer(sc_obj, &sc, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&pts);
        PyBuffer_Release(&tab);
        return NULL;
    }
    PyObject *result = NULL;
    u64 *scalars = NULL;
    size_t n = (size_t)sc.len / 32;
    if ((size_t)sc.len % 32 != 0 || (size_t)pts.len != n * row ||
        (size_t)tab.len != (size_t)(t - 1) * n * row) {
        PyErr_Format(PyExc_ValueError,
                     "MSM size mismatch: %zd point bytes, %zd table bytes, %zd scalar bytes",
                     pts.len, tab.len, sc.len);
        goto done;
    }
    if (n > 0xffffffffULL) {
        PyErr_SetString(PyExc_ValueError, "MSM too large");
        goto done;
    }
    if (threads > 64) threads = 64;
    if (threads < 1) threads = 1;
    const u64 *words = aligned_scalars(&sc, n, &scalars);
    if (words == NULL)
        goto done;
    msm_tab_fn fn;
#if HAVE_FAST_PATH
    if (fast && cpu_has_fast())
        fn = group == 1 ? g1_msm_tab_adx : g2_msm_tab_adx;
    else
#endif
        fn = group == 1 ? g1_msm_tab_portable : g2_msm_tab_portable;
    (void)fast;
    u64 out[24];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn((const unsigned char *)pts.buf, (const unsigned char *)tab.buf, t, c,
            words, n, threads, out);
    Py_END_ALLOW_THREADS
    if (rc == -1) {
        PyErr_NoMemory();
    } else if (rc == -2) {
        PyErr_SetString(PyExc_ValueError, "a scalar is 2^255 or more: not a reduced Fr element");
    } else if (rc == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(2 * nw * 8));
    }
done:
    PyMem_RawFree(scalars);
    PyBuffer_Release(&pts);
    PyBuffer_Release(&tab);
    PyBuffer_Release(&sc);
    return result;
}

/* table_fill(group, points, out, t, shift, threads, fast): writes copies 1..t-1 of the points
 * (copy j = 2^(j * shift) * P) into the writable buffer out, (t - 1) * n rows. */
static PyObject *py_table_fill(PyObject *self, PyObject *args) {
    int group, t, shift, threads, fast;
    PyObject *pts_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "iOOiiii", &group, &pts_obj, &out_obj, &t, &shift, &threads,
                          &fast))
        return NULL;
    if (group != 1 && group != 2) {
        PyErr_SetString(PyExc_ValueError, "group must be 1 or 2");
        return NULL;
    }
    if (t < 1 || t > 256 || shift < 1) {
        PyErr_Format(PyExc_ValueError, "bad table shape: %d copies, shift %d", t, shift);
        return NULL;
    }
    const size_t row = group == 1 ? 96 : 192;
    Py_buffer pts, out;
    if (PyObject_GetBuffer(pts_obj, &pts, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&pts);
        return NULL;
    }
    PyObject *result = NULL;
    size_t n = (size_t)pts.len / row;
    if ((size_t)pts.len % row != 0 || (size_t)out.len != (size_t)(t - 1) * n * row) {
        PyErr_Format(PyExc_ValueError, "table size mismatch: %zd point bytes, %zd table bytes",
                     pts.len, out.len);
        goto done;
    }
    if (threads > 64) threads = 64;
    if (threads < 1) threads = 1;
    fill_fn fn;
#if HAVE_FAST_PATH
    if (fast && cpu_has_fast())
        fn = group == 1 ? g1_table_fill_adx : g2_table_fill_adx;
    else
#endif
        fn = group == 1 ? g1_table_fill_portable : g2_table_fill_portable;
    (void)fast;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn((const unsigned char *)pts.buf, n, t, shift, (unsigned char *)out.buf, threads);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
    } else {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    PyBuffer_Release(&pts);
    PyBuffer_Release(&out);
    return result;
}

/* first_bad(group, points) -> index of the first row that is not a curve point, or -1. */
static PyObject *py_first_bad(PyObject *self, PyObject *args) {
    int group;
    PyObject *pts_obj;
    if (!PyArg_ParseTuple(args, "iO", &group, &pts_obj)) return NULL;
    if (group != 1 && group != 2) {
        PyErr_SetString(PyExc_ValueError, "group must be 1 or 2");
        return NULL;
    }
    const size_t row = group == 1 ? 96 : 192;
    Py_buffer pts;
    if (PyObject_GetBuffer(pts_obj, &pts, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if ((size_t)pts.len % row != 0) {
        PyBuffer_Release(&pts);
        PyErr_SetString(PyExc_ValueError, "point bytes are not a whole number of rows");
        return NULL;
    }
    long long bad;
    size_t n = (size_t)pts.len / row;
    int fast = cpu_has_fast();
    Py_BEGIN_ALLOW_THREADS
#if HAVE_FAST_PATH
    if (fast)
        bad = group == 1 ? g1_first_bad_adx(pts.buf, n) : g2_first_bad_adx(pts.buf, n);
    else
#endif
        bad = group == 1 ? g1_first_bad_portable(pts.buf, n) : g2_first_bad_portable(pts.buf, n);
    Py_END_ALLOW_THREADS
    (void)fast;
    PyBuffer_Release(&pts);
    return PyLong_FromLongLong(bad);
}

/* batch_affine(batch, min_g1, min_g2) -> the previous triple: the bucket batch size (0: no
 * batching) and the smallest batch worth its inversion per group; a tuning and test hook. */
static PyObject *py_batch_affine(PyObject *self, PyObject *args) {
    int batch, min_g1, min_g2;
    if (!PyArg_ParseTuple(args, "iii", &batch, &min_g1, &min_g2)) return NULL;
    if (batch < 0 || batch > BUCKET_BATCH_MAX || min_g1 < 0 || min_g2 < 0) {
        PyErr_Format(PyExc_ValueError, "batch must be 0..%d and the minimums >= 0",
                     BUCKET_BATCH_MAX);
        return NULL;
    }
    PyObject *old = Py_BuildValue("(iii)", bucket_batch, bucket_min_batch[0], bucket_min_batch[1]);
    if (old == NULL) return NULL;
    bucket_batch = batch;
    bucket_min_batch[0] = min_g1;
    bucket_min_batch[1] = min_g2;
    return old;
}

static PyObject *py_fast_available(PyObject *self, PyObject *noargs) {
    return PyBool_FromLong(cpu_has_fast());
}

static PyMethodDef methods[] = {
    {"msm", py_msm, METH_VARARGS,
     "msm(group, points, scalars, threads, fast) -> affine x||y bytes, or None for infinity"},
    {"msm_tab", py_msm_tab, METH_VARARGS,
     "msm_tab(group, points, table, t, c, scalars, threads, fast) -> as msm, with a window table"},
    {"table_fill", py_table_fill, METH_VARARGS,
     "table_fill(group, points, out, t, shift, threads, fast): copies 1..t-1 of a window table"},
    {"first_bad", py_first_bad, METH_VARARGS,
     "first_bad(group, points) -> first row not on the curve (nor infinity), or -1"},
    {"batch_affine", py_batch_affine, METH_VARARGS,
     "batch_affine(batch, min_g1, min_g2) -> the previous bucket batching setting"},
    {"fast_available", py_fast_available, METH_NOARGS,
     "True when this CPU has BMI2 and ADX (the fast multiply path)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_msm",
                                    "Native BLS12-381 MSM over zkey point bytes", -1, methods};

PyMODINIT_FUNC PyInit__msm(void) { return PyModule_Create(&module); }
