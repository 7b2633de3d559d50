// Pippenger MSM kernels for BLS12-381 G1 (over Fq) and G2 (over Fq2), and field test kernels.
//
// One source, two builds:
// * nvcc -cubin (scripts/build_gpu_kernels.py): every KERNEL below is an extern "C" __global__
//   taking its thread count first; kernels/gpu/cxx_msm.py launches them through CuPy.
// * the host twin (c++ -shared, kernels/gpu/cxx_host.py): every KERNEL is an extern "C"
//   function host_<name> running the same per-thread body in a loop, for the CPU tests.
//
// The MSM (driven by kernels/gpu/cxx_msm.py), for m points, windows of c bits, nwin windows and
// half = 2^(c-1) buckets per bucket set (signed digits in [-2^(c-1), 2^(c-1)], zero digits
// dropped). The points may come with precomputed copies (a resident key's window table): rows
// j*m .. j*m + m-1 hold copy j = 2^(j * passes * c) * P, copy 0 the points themselves. Window
// w then uses copy j = w / passes and bucket set p = w % passes, so the nwin windows share
// passes = ceil(nwin / copies) bucket sets (one copy: passes = nwin, each window its own set).
// 1. msm_digit_counts: per (scalar, window) with a non-zero digit, counts[key] += 1 (key =
//    p * half + |digit| - 1); warp-aggregated atomics, so a hot bucket (scalar 1 is common
//    in witnesses) costs one atomic per warp, not per thread.
// 2. the host scans the counts into bucket offsets (a counting sort: no radix sort of records).
// 3. msm_digit_scatter: the same digits again, each record (sign << 31 | point row j*m + i)
//    written at its bucket's cursor. Order inside a bucket does not matter to a sum.
// 4. <curve>_accumulate: each bucket's run is cut into chunks of at most K records, one thread
//    per chunk sums its points (mixed XYZZ additions), so a huge bucket is spread over many
//    threads; a thread finds its bucket by binary search in the chunk starts.
// 5. <curve>_reduce: the same cut over chunk sums (full additions) until one sum per bucket.
// 6. <curve>_segments: per bucket set, segments of buckets; one thread per segment computes
//    sum (b + 1) * B_b over its buckets with the running-sum trick plus lo * sum B_b.
// 7. <curve>_reduce again sums the segments of each set; the passes set sums go to the host,
//    which combines them by Horner's rule (a factor 2^c between sets).
#include "bls12_381.cuh"
#include "xyzz.cuh"

#if defined(__CUDACC__)
#define KERNEL_THREAD_INDEX() (blockIdx.x * blockDim.x + threadIdx.x)
#endif

// -------------------------------------------------------------------------------- digits

// The signed digit of scalar i in window w (scalars: normal form, 8 u32 limbs each), carrying
// into the next window; its bucket key in bucket set p. Returns false for a zero digit.
CZ_HD bool msm_digit(const u32* scalars, u32 i, u32 w, u32 c, u32 p, u32& carry, u32& key,
                     u32& neg) {
    const u32 half = 1u << (c - 1);
    const u32 full = 1u << c;
    const u32 off = w * c;
    const u32 limb = off >> 5;
    const u32 sh = off & 31;
    u64 v = 0;
    if (limb < 8) {
        v = scalars[(u64)i * 8 + limb];
        if (limb + 1 < 8) v |= (u64)scalars[(u64)i * 8 + limb + 1] << 32;
    }
    u32 d = (u32)((v >> sh) & (full - 1)) + carry;
    if (d > half) {
        d = full - d;
        neg = 1;
        carry = 1;
    } else {
        neg = 0;
        carry = 0;
    }
    if (d == 0) return false;
    key = p * half + d - 1;
    return true;
}

// counter[key] += 1 for every thread of the warp with live set; returns each thread's old
// value plus its rank among the warp's threads with the same key. Every thread of the warp
// must call it (live or not).
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ u32 warp_claim(u32* counter, u32 key, bool live) {
    const unsigned active = __ballot_sync(0xffffffffu, live);
    if (!live) return 0;
    const unsigned peers = __match_any_sync(active, key);
    const int lane = threadIdx.x & 31;
    const int leader = __ffs(peers) - 1;
    u32 base = 0;
    if (lane == leader) base = atomicAdd(&counter[key], (u32)__popc(peers));
    base = __shfl_sync(peers, base, leader);
    return base + (u32)__popc(peers & ((1u << lane) - 1u));
}
#else
inline u32 warp_claim(u32* counter, u32 key, bool live) {
    if (!live) return 0;
    return counter[key]++;
}
#endif

// Window w of a scalar reads copy j = w / passes of its point (row j * m + i) into bucket set
// p = w % passes; j and p are stepped along with w (no division).
CZ_HD void digit_counts_body(u32 i, bool live, const u32* scalars, u32 c, u32 nwin, u32 passes,
                             u32* counts) {
    u32 carry = 0, p = 0;
    for (u32 w = 0; w < nwin; w++) {
        u32 key = 0, neg = 0;
        const bool nz = live && msm_digit(scalars, i, w, c, p, carry, key, neg);
        warp_claim(counts, key, nz);
        if (++p == passes) p = 0;
    }
}

CZ_HD void digit_scatter_body(u32 i, bool live, const u32* scalars, u32 c, u32 nwin, u32 passes,
                              u32 m, u32* cursor, u32* records) {
    u32 carry = 0, p = 0, row = i;
    for (u32 w = 0; w < nwin; w++) {
        u32 key = 0, neg = 0;
        const bool nz = live && msm_digit(scalars, i, w, c, p, carry, key, neg);
        const u32 pos = warp_claim(cursor, key, nz);
        if (nz) records[pos] = (neg << 31) | row;
        if (++p == passes) {
            p = 0;
            row += m;
        }
    }
}

// -------------------------------------------------------------------------------- buckets

// The largest b < nb with starts[b] <= j (starts non-decreasing, starts[0] = 0 <= j): the group
// that chunk j belongs to (empty groups share their start with the next one and are skipped).
CZ_HD u32 group_of(const u32* starts, u32 nb, u32 j) {
    u32 lo = 0, hi = nb;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (starts[mid] <= j) lo = mid;
        else hi = mid;
    }
    return lo;
}

// Chunk j of the records grouped by bucket: offsets[b] .. offsets[b+1] are bucket b's records,
// cstart[b] its first chunk. out[j] = the sum of the chunk's +-points.
template <class E>
CZ_HD void accumulate_body(u32 j, const u32* records, const u32* offsets, const u32* cstart,
                           u32 nb, u32 k, const u32* points, u32* out) {
    constexpr int W = sizeof(E) / sizeof(u32);
    const u32 b = group_of(cstart, nb, j);
    const u32 lo = offsets[b] + (j - cstart[b]) * k;
    const u32 end = offsets[b + 1];
    const u32 hi = lo + k < end ? lo + k : end;
    Xyzz<E> acc = Xyzz<E>::inf();
    for (u32 e = lo; e < hi; e++) {
        const u32 r = records[e];
        const u32* pt = points + (u64)(r & 0x7fffffffu) * (2 * W);
#if defined(__CUDA_ARCH__)
        // A point row is 16-byte aligned (96 or 192 bytes): 16-byte loads through the
        // read-only cache, a quarter of the memory transactions of word loads.
        u32 row[2 * W];
#pragma unroll
        for (int q = 0; q < W / 2; q++) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(pt) + q);
            row[4 * q] = v.x;
            row[4 * q + 1] = v.y;
            row[4 * q + 2] = v.z;
            row[4 * q + 3] = v.w;
        }
        pt = row;
#endif
        xyzz_add_affine(acc, E::load(pt), E::load(pt + W), (r >> 31) != 0);
    }
    acc.store(out + (u64)j * Xyzz<E>::WORDS);
}

// Chunk j of XYZZ sums grouped by key: pstart[g] .. pstart[g+1] are group g's sums, nstart[g]
// its first output chunk. out[j] = the sum of at most k of them.
template <class E>
CZ_HD void reduce_body(u32 j, const u32* parts, const u32* pstart, const u32* nstart, u32 ng,
                       u32 k, u32* out) {
    constexpr int XW = Xyzz<E>::WORDS;
    const u32 g = group_of(nstart, ng, j);
    const u32 lo = pstart[g] + (j - nstart[g]) * k;
    const u32 end = pstart[g + 1];
    const u32 hi = lo + k < end ? lo + k : end;
    Xyzz<E> acc = Xyzz<E>::inf();
    for (u32 e = lo; e < hi; e++) xyzz_add(acc, Xyzz<E>::load(parts + (u64)e * XW));
    acc.store(out + (u64)j * XW);
}

// Segment j of the buckets (seg buckets of one bucket set): sum_{b in seg} (b + 1) * B_b, where
// bucket b (digit b + 1) holds parts[pstart[b]] when pstart[b + 1] > pstart[b], else nothing.
template <class E>
CZ_HD void segments_body(u32 j, const u32* parts, const u32* pstart, u32 nb, u32 seg,
                         u32* out) {
    constexpr int XW = Xyzz<E>::WORDS;
    const u32 per_win = nb / seg;
    const u32 w = j / per_win;
    const u32 lo = (j - w * per_win) * seg;
    const u32 base = w * nb + lo;
    Xyzz<E> run = Xyzz<E>::inf();
    Xyzz<E> tot = Xyzz<E>::inf();
    for (int kk = (int)seg - 1; kk >= 0; kk--) {
        const u32 b = base + (u32)kk;
        if (pstart[b + 1] > pstart[b]) xyzz_add(run, Xyzz<E>::load(parts + (u64)pstart[b] * XW));
        xyzz_add(tot, run);
    }
    if (lo) xyzz_add(tot, xyzz_mul_small(run, lo));
    tot.store(out + (u64)j * XW);
}

// -------------------------------------------------------------------------------- field tests

// For each i: out[0][i] = a*b, out[1][i] = a+b, out[2][i] = a-b, out[3][i] = a^2 (Montgomery).
template <class E>
CZ_HD void field_ops_body(u32 i, u32 n, const u32* a, const u32* b, u32* out) {
    constexpr int W = sizeof(E) / sizeof(u32);
    const E x = E::load(a + (u64)i * W);
    const E y = E::load(b + (u64)i * W);
    (x * y).store(out + (u64)i * W);
    (x + y).store(out + ((u64)n + i) * W);
    (x - y).store(out + (2 * (u64)n + i) * W);
    sqr(x).store(out + (3 * (u64)n + i) * W);
}

// -------------------------------------------------------------------------------- entry points

#if defined(__CUDACC__)
#define GRID_KERNEL(name, params, call)                                        \
    extern "C" __global__ void name(u32 n_threads, params) {                   \
        const u32 j = KERNEL_THREAD_INDEX();                                   \
        if (j >= n_threads) return;                                            \
        call;                                                                  \
    }
#define WARP_KERNEL(name, params, call)                                        \
    extern "C" __global__ void name(u32 n_threads, params) {                   \
        const u32 j = KERNEL_THREAD_INDEX();                                   \
        const bool live = j < n_threads;                                       \
        if (__all_sync(0xffffffffu, !live)) return;                            \
        call;                                                                  \
    }
#else
#define GRID_KERNEL(name, params, call)                                        \
    extern "C" void host_##name(u32 n_threads, params) {                       \
        for (u32 j = 0; j < n_threads; j++) { call; }                          \
    }
#define WARP_KERNEL(name, params, call)                                        \
    extern "C" void host_##name(u32 n_threads, params) {                       \
        const bool live = true;                                                \
        for (u32 j = 0; j < n_threads; j++) { call; }                          \
    }
#endif
#define P(...) __VA_ARGS__

WARP_KERNEL(msm_digit_counts,
            P(const u32* scalars, u32 c, u32 nwin, u32 passes, u32* counts),
            digit_counts_body(j, live, scalars, c, nwin, passes, counts))
WARP_KERNEL(msm_digit_scatter,
            P(const u32* scalars, u32 c, u32 nwin, u32 passes, u32 m, u32* cursor,
              u32* records),
            digit_scatter_body(j, live, scalars, c, nwin, passes, m, cursor, records))

#define CURVE_KERNELS(prefix, E)                                                               \
    GRID_KERNEL(prefix##_accumulate,                                                           \
                P(const u32* records, const u32* offsets, const u32* cstart, u32 nb, u32 k,    \
                  const u32* points, u32* out),                                                \
                accumulate_body<E>(j, records, offsets, cstart, nb, k, points, out))           \
    GRID_KERNEL(prefix##_reduce,                                                               \
                P(const u32* parts, const u32* pstart, const u32* nstart, u32 ng, u32 k,       \
                  u32* out),                                                                   \
                reduce_body<E>(j, parts, pstart, nstart, ng, k, out))                          \
    GRID_KERNEL(prefix##_segments,                                                             \
                P(const u32* parts, const u32* pstart, u32 nb, u32 seg, u32* out),             \
                segments_body<E>(j, parts, pstart, nb, seg, out))                              \
    GRID_KERNEL(prefix##_field_ops, P(u32 n, const u32* a, const u32* b, u32* out),            \
                field_ops_body<E>(j, n, a, b, out))

CURVE_KERNELS(g1, Fq)
CURVE_KERNELS(g2, Fq2)

#include "ntt.cuh"  // the NTT and H pipeline over Fr, fr_field_ops
