/* 64-bit limb arithmetic shared by the native field code (msm.c, qap.c): the limb types, token
 * pasting for the per-path names (ARCH suffix), and 64x64->128 multiply and add/subtract with
 * carry: adc/sbb intrinsics on x86-64, plain C elsewhere. arith_adx.h switches MUL64/ADDC to
 * mulx/adcx inside a bmi2,adx target region. */
#ifndef CUZK_ARITH_H
#define CUZK_ARITH_H

#include <stdint.h>

typedef uint64_t u64;
typedef unsigned __int128 u128;

#define CAT(a, b) a##b
#define XCAT(a, b) CAT(a, b)

#if defined(__x86_64__) && defined(__GNUC__)
#include <x86intrin.h>
#define SUBB(b, x, y, out) _subborrow_u64((b), (x), (y), (unsigned long long *)(out))
#define ADDC(c, x, y, out) _addcarry_u64((c), (x), (y), (unsigned long long *)(out))
#else
static inline unsigned char addc_(unsigned char c, u64 x, u64 y, u64 *out) {
    u128 s = (u128)x + y + c;
    *out = (u64)s;
    return (unsigned char)(s >> 64);
}
static inline unsigned char subb_(unsigned char b, u64 x, u64 y, u64 *out) {
    u128 d = (u128)x - y - b;
    *out = (u64)d;
    return (unsigned char)((d >> 64) & 1);
}
#define SUBB(b, x, y, out) subb_((b), (x), (y), (u64 *)(out))
#define ADDC(c, x, y, out) addc_((c), (x), (y), (u64 *)(out))
#endif
/* Whether the CPU running this has BMI2 and ADX, what the fast path's mulx/adcx/adox need
 * (asked at run time: the extension is built once and may run on another CPU). */
static inline int cpu_has_fast(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("adx");
#else
    return 0;
#endif
}

#define MUL64(hi, lo, x, y)                 \
    do {                                    \
        u128 z__ = (u128)(x) * (y);         \
        (lo) = (u64)z__;                    \
        (hi) = (u64)(z__ >> 64);            \
    } while (0)

/* One multiply-accumulate step of a Montgomery product (CIOS): t += x*y + carry, the high word
 * to carry. MUL64 and ADDC are whatever the including code path defines (mulx/adx or portable),
 * as they are expanded where used. Both fields (fp_tmpl.h, fr_tmpl.h) build their rounds on it. */
#define MONT_MAC(t, x, y, carry)                                 \
    do {                                                         \
        u64 hi_, lo_;                                            \
        MUL64(hi_, lo_, x, y);                                   \
        hi_ += ADDC(0, (t), lo_, &(t));                          \
        hi_ += ADDC(0, (t), (carry), &(t));                      \
        (carry) = hi_;                                           \
    } while (0)
/* The interleaved reduction step: dst = src + m*p_j + carry (dst is one word down, the
 * Montgomery shift), the high word to carry. */
#define MONT_RED(dst, src, m, pj, carry)                         \
    do {                                                         \
        u64 hi_, lo_, x_;                                        \
        MUL64(hi_, lo_, m, pj);                                  \
        hi_ += ADDC(0, (src), lo_, &x_);                         \
        hi_ += ADDC(0, x_, (carry), &(dst));                     \
        (carry) = hi_;                                           \
    } while (0)

/* One limb j >= 1 of a round: accumulate a_i*b_j into t, then reduce it into the word below. */
#define MONT_LIMB(dst, t, ai, bj, m, pj, acc, carry)            \
    do {                                                         \
        MONT_MAC(t, ai, bj, acc);                                \
        MONT_RED(dst, t, m, pj, carry);                          \
    } while (0)

#endif
