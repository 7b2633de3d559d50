// The NTT and the H pipeline over BLS12-381's Fr (field.cuh's Montgomery field, 8 limbs), driven
// by kernels/gpu/cxx_ntt.py. Included at the end of msm.cu (its GRID_KERNEL entry points).
//
// Layout: row-major (n, 8) u32 Montgomery elements, one 32-byte row per element, as the H MSM
// and the uploads use them (no limb-major copy). A row is one 32-byte memory sector, so any
// pattern of whole-row loads uses every byte it moves: the passes need no shared memory to
// coalesce, and with no barriers the host twin (each thread's body in a loop) runs exactly what
// the device runs.
//
// A transform of 2^log_n is split into passes of K radix-2 stages (the last one shorter). A pass
// over index bits [b_lo, b_lo + K) has n / 2^K threads; thread j loads the 2^K elements that
// differ only in those bits (the others from j: bits below b_lo are j's low bits, bits above
// its high bits), runs the K stages in registers and stores them back in place.
// * DIF (Gentleman-Sande, natural -> bit-reversed), stages from the top bit down: at global bit
//   b, (x, y) -> (x + y, (x - y) w^e), e = the index mod 2^b, in units of w_{2^(b+1)}.
// * DIT (Cooley-Tukey, bit-reversed -> natural), stages from bit 0 up: (x + w^e y, x - w^e y).
// Twiddles: one table tw[e] = w_N^e (e < N/2) for the largest domain, rows like the data; a
// stage at bit b reads it at stride 2^(log N - 1 - b). Inverse transforms use
// w^-e = -w^(N/2 - e) (w^(N/2) = -1): the same table, the butterfly's sign swapped.
// The odd-coset shift (position p times g^bitrev(p) / n between the inverse DIF and the forward
// DIT) is fused into the DIT's first pass: each element is multiplied as it is loaded, by
// lo[i & mask] * hi[i >> kl] (i = bitrev(p)), two small tables of sqrt(n) rows that carry 1/n.
#pragma once

CZ_HD u32 ntt_bitrev(u32 i, u32 bits) {
#if defined(__CUDA_ARCH__)
    return bits ? __brev(i) >> (32 - bits) : 0u;
#else
    u32 r = 0;
    for (u32 k = 0; k < bits; k++) {
        r = (r << 1) | (i & 1u);
        i >>= 1;
    }
    return r;
#endif
}

// base^e * scale from the split power tables (lo[e & mask] * hi[e >> kl]).
CZ_HD Fr ntt_pow(const u32* lo, const u32* hi, u32 kl, u32 e) {
    return Fr::load(lo + (u64)(e & ((1u << kl) - 1u)) * 8) * Fr::load(hi + (u64)(e >> kl) * 8);
}

// One pass of K stages over index bits [b_lo, b_lo + K) (see above); thread j of n / 2^K.
// tw: the twiddle table of 2^(log_tw - 1) rows. coset != 0 (DIT only): the odd-coset factor is
// applied on load, lo/hi/kl its tables and log_n the transform's size.
template <int K, bool DIT>
CZ_HD void ntt_pass_body(u32 j, u32* x, const u32* tw, u32 log_tw, u32 b_lo, u32 inverse,
                         const u32* lo, const u32* hi, u32 kl, u32 log_n, u32 coset) {
    constexpr int M = 1 << K;
    const u32 low = j & ((1u << b_lo) - 1u);
    const u64 base = ((u64)(j >> b_lo) << (b_lo + K)) | low;
    const u32 half_tw = 1u << (log_tw - 1);
    Fr v[M];
#pragma unroll
    for (int s = 0; s < M; s++) {
        const u64 idx = base | ((u64)s << b_lo);
        // Operands of a called multiply are copies: a reference into v would put the whole
        // array on the stack (ptx-callmul passes the multiply's operands by address).
        Fr a = Fr::load(x + idx * 8);
        if (DIT && coset) a = a * ntt_pow(lo, hi, kl, ntt_bitrev((u32)idx, log_n));
        v[s] = a;
    }
#pragma unroll
    for (int st = 0; st < K; st++) {
        const int bit = DIT ? st : K - 1 - st;
        const u32 h = 1u << bit;
        const u32 shift = log_tw - 1 - (b_lo + bit);
#pragma unroll
        for (int q = 0; q < M / 2; q++) {
            const int s0 = ((q >> bit) << (bit + 1)) | (q & (int)(h - 1));
            const int s1 = s0 | (int)h;
            const u32 e = ((((u32)s0 & (h - 1)) << b_lo) | low) << shift;
            const bool neg = inverse && e != 0;
            const Fr w = Fr::load(tw + (u64)(neg ? half_tw - e : e) * 8);
            if (DIT) {
                const Fr y = v[s1];
                const Fr t = y * w;
                const Fr sum = v[s0] + t;
                const Fr dif = v[s0] - t;
                v[s0] = neg ? dif : sum;
                v[s1] = neg ? sum : dif;
            } else {
                const Fr sum = v[s0] + v[s1];
                const Fr x0 = neg ? v[s1] : v[s0];
                const Fr x1 = neg ? v[s0] : v[s1];
                v[s0] = sum;
                v[s1] = (x0 - x1) * w;
            }
        }
    }
#pragma unroll
    for (int s = 0; s < M; s++) v[s].store(x + (base | ((u64)s << b_lo)) * 8);
}

// out[j] = lo[j & mask] * hi[j >> kl]: a power table (the twiddles) from two small ones.
CZ_HD void ntt_pow_table_body(u32 j, const u32* lo, const u32* hi, u32 kl, u32* out) {
    ntt_pow(lo, hi, kl, j).store(out + (u64)j * 8);
}

// out[bitrev(i)] = src[i] (out of place).
CZ_HD void ntt_bitrev_body(u32 i, const u32* src, u32* out, u32 log_n) {
    Fr::load(src + (u64)i * 8).store(out + (u64)ntt_bitrev(i, log_n) * 8);
}

// x[i] *= s (s: one Montgomery row).
CZ_HD void ntt_scale_body(u32 i, u32* x, const u32* s) {
    (Fr::load(x + (u64)i * 8) * Fr::load(s)).store(x + (u64)i * 8);
}

// out[i] = from_mont(a[i] * b[i] - c[i]): snarkjs joinABC, the H MSM's scalars (normal form).
CZ_HD void ntt_abc_body(u32 i, const u32* a, const u32* b, const u32* c, u32* out) {
    const Fr z = Fr::load(a + (u64)i * 8) * Fr::load(b + (u64)i * 8) - Fr::load(c + (u64)i * 8);
    Fr one = Fr::zero();
    one.v[0] = 1;
    (z * one).store(out + (u64)i * 8);
}

#define NTT_PASS_KERNELS(k)                                                                    \
    GRID_KERNEL(ntt_dif##k,                                                                    \
                P(u32* x, const u32* tw, u32 log_tw, u32 b_lo, u32 inverse, const u32* lo,     \
                  const u32* hi, u32 kl, u32 log_n, u32 coset),                                \
                P(ntt_pass_body<k, false>(j, x, tw, log_tw, b_lo, inverse, lo, hi, kl, log_n,  \
                                          coset)))                                             \
    GRID_KERNEL(ntt_dit##k,                                                                    \
                P(u32* x, const u32* tw, u32 log_tw, u32 b_lo, u32 inverse, const u32* lo,     \
                  const u32* hi, u32 kl, u32 log_n, u32 coset),                                \
                P(ntt_pass_body<k, true>(j, x, tw, log_tw, b_lo, inverse, lo, hi, kl, log_n,   \
                                         coset)))

NTT_PASS_KERNELS(1)
NTT_PASS_KERNELS(2)
NTT_PASS_KERNELS(3)  // K = 4 needs 254 registers (dit4), half K = 3's occupancy
GRID_KERNEL(ntt_pow_table, P(const u32* lo, const u32* hi, u32 kl, u32* out),
            ntt_pow_table_body(j, lo, hi, kl, out))
GRID_KERNEL(ntt_bitrev, P(const u32* src, u32* out, u32 log_n), ntt_bitrev_body(j, src, out, log_n))
GRID_KERNEL(ntt_scale, P(u32* x, const u32* s), ntt_scale_body(j, x, s))
GRID_KERNEL(ntt_abc, P(const u32* a, const u32* b, const u32* c, u32* out),
            ntt_abc_body(j, a, b, c, out))
GRID_KERNEL(fr_field_ops, P(u32 n, const u32* a, const u32* b, u32* out),
            field_ops_body<Fr>(j, n, a, b, out))
