/* Fr Montgomery multiplication for BMI2/ADX CPUs: fp_mulx_asm.h's schedule on 4 limbs (mulx for
 * the products, adcx on CF for the low halves and adox on OF for the high halves, one spare word
 * t4 for the round's carry). Compiled only inside the bmi2,adx target. */

#define FRX_ROW(src, off, lo_dst, hi_dst)                        \
    "mulxq " off "(%[" src "]), %[lo], %[hi]\n\t"                \
    "adcxq %[lo], %[" lo_dst "]\n\t"                             \
    "adoxq %[hi], %[" hi_dst "]\n\t"
#define FRX_PROW(pk, lo_dst, hi_dst)                             \
    "mulxq %[" pk "], %[lo], %[hi]\n\t"                          \
    "adcxq %[lo], %[" lo_dst "]\n\t"                             \
    "adoxq %[hi], %[" hi_dst "]\n\t"
#define FRX_ROUND(aoff)                                          \
    "movq " aoff "(%[a]), %[dx]\n\t"                             \
    "xorl %k[z], %k[z]\n\t"                                      \
    "movq %[z], %[t4]\n\t"                                       \
    FRX_ROW("b", "0", "t0", "t1")                                \
    FRX_ROW("b", "8", "t1", "t2")                                \
    FRX_ROW("b", "16", "t2", "t3")                               \
    FRX_ROW("b", "24", "t3", "t4")                               \
    "adcxq %[z], %[t4]\n\t"                                      \
    "movq %[t0], %[dx]\n\t"                                      \
    "imulq %[inv], %[dx]\n\t"                                    \
    "xorl %k[z], %k[z]\n\t"                                      \
    FRX_PROW("p0", "t0", "t1")                                   \
    FRX_PROW("p1", "t1", "t2")                                   \
    FRX_PROW("p2", "t2", "t3")                                   \
    FRX_PROW("p3", "t3", "t4")                                   \
    "adcxq %[z], %[t4]\n\t"                                      \
    "movq %[t1], %[t0]\n\t"                                      \
    "movq %[t2], %[t1]\n\t"                                      \
    "movq %[t3], %[t2]\n\t"                                      \
    "movq %[t4], %[t3]\n\t"

static inline void fr_mul_mulx(u64 out[4], const u64 a[4], const u64 b[4]) {
    u64 t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4, lo, hi, dx, z;
    __asm__(FRX_ROUND("0") FRX_ROUND("8") FRX_ROUND("16") FRX_ROUND("24")
            : [t0] "+&r"(t0), [t1] "+&r"(t1), [t2] "+&r"(t2), [t3] "+&r"(t3), [t4] "=&r"(t4),
              [lo] "=&r"(lo), [hi] "=&r"(hi), [dx] "=&d"(dx), [z] "=&r"(z)
            : [a] "r"(a), [b] "r"(b), "m"(*(const u64(*)[4])a), "m"(*(const u64(*)[4])b),
              [p0] "m"(FR_P[0]), [p1] "m"(FR_P[1]), [p2] "m"(FR_P[2]), [p3] "m"(FR_P[3]),
              [inv] "m"(FR_INV)
            : "cc");
    (void)t4;
    (void)lo;
    (void)hi;
    (void)dx;
    (void)z;
    out[0] = t0;
    out[1] = t1;
    out[2] = t2;
    out[3] = t3;
}

#undef FRX_ROUND
#undef FRX_PROW
#undef FRX_ROW
