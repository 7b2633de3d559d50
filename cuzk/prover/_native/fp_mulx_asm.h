/* Montgomery multiplication for BMI2/ADX CPUs: mulx for the products and two independent carry
 * chains (adcx on CF for the low halves, adox on OF for the high halves), the same operand-
 * scanning schedule as the portable FP_ROUND. Each round adds a[i]*b into t0..t6, then m*p with
 * m = t0 * (-p^-1), and shifts one limb down. Compiled only inside the bmi2,adx target. */

#define MX_ROW(src, off, lo_dst, hi_dst)                         \
    "mulxq " off "(%[" src "]), %[lo], %[hi]\n\t"                \
    "adcxq %[lo], %[" lo_dst "]\n\t"                             \
    "adoxq %[hi], %[" hi_dst "]\n\t"
#define MX_PROW(pk, lo_dst, hi_dst)                              \
    "mulxq %[" pk "], %[lo], %[hi]\n\t"                          \
    "adcxq %[lo], %[" lo_dst "]\n\t"                             \
    "adoxq %[hi], %[" hi_dst "]\n\t"
#define MX_ROUND(aoff)                                           \
    "movq " aoff "(%[a]), %[dx]\n\t"                             \
    "xorl %k[z], %k[z]\n\t"                                      \
    "movq %[z], %[t6]\n\t"                                       \
    MX_ROW("b", "0", "t0", "t1")                                 \
    MX_ROW("b", "8", "t1", "t2")                                 \
    MX_ROW("b", "16", "t2", "t3")                                \
    MX_ROW("b", "24", "t3", "t4")                                \
    MX_ROW("b", "32", "t4", "t5")                                \
    MX_ROW("b", "40", "t5", "t6")                                \
    "adcxq %[z], %[t6]\n\t"                                      \
    "movq %[t0], %[dx]\n\t"                                      \
    "imulq %[inv], %[dx]\n\t"                                    \
    "xorl %k[z], %k[z]\n\t"                                      \
    MX_PROW("p0", "t0", "t1")                                    \
    MX_PROW("p1", "t1", "t2")                                    \
    MX_PROW("p2", "t2", "t3")                                    \
    MX_PROW("p3", "t3", "t4")                                    \
    MX_PROW("p4", "t4", "t5")                                    \
    MX_PROW("p5", "t5", "t6")                                    \
    "adcxq %[z], %[t6]\n\t"                                      \
    "movq %[t1], %[t0]\n\t"                                      \
    "movq %[t2], %[t1]\n\t"                                      \
    "movq %[t3], %[t2]\n\t"                                      \
    "movq %[t4], %[t3]\n\t"                                      \
    "movq %[t5], %[t4]\n\t"                                      \
    "movq %[t6], %[t5]\n\t"

static inline void fp_mul_mulx(u64 out[6], const u64 a[6], const u64 b[6]) {
    u64 t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0, t5 = 0, t6, lo, hi, dx, z;
    __asm__(MX_ROUND("0") MX_ROUND("8") MX_ROUND("16") MX_ROUND("24") MX_ROUND("32")
                MX_ROUND("40")
            : [t0] "+&r"(t0), [t1] "+&r"(t1), [t2] "+&r"(t2), [t3] "+&r"(t3), [t4] "+&r"(t4),
              [t5] "+&r"(t5), [t6] "=&r"(t6), [lo] "=&r"(lo), [hi] "=&r"(hi), [dx] "=&d"(dx),
              [z] "=&r"(z)
            : [a] "r"(a), [b] "r"(b), "m"(*(const u64(*)[6])a), "m"(*(const u64(*)[6])b),
              [p0] "m"(FP_P[0]), [p1] "m"(FP_P[1]), [p2] "m"(FP_P[2]), [p3] "m"(FP_P[3]),
              [p4] "m"(FP_P[4]), [p5] "m"(FP_P[5]), [inv] "m"(FP_INV)
            : "cc");
    (void)t6;
    (void)lo;
    (void)hi;
    (void)dx;
    (void)z;
    out[0] = t0;
    out[1] = t1;
    out[2] = t2;
    out[3] = t3;
    out[4] = t4;
    out[5] = t5;
}

#undef MX_ROUND
#undef MX_PROW
#undef MX_ROW
