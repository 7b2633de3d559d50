/* One instantiation of the MSM arithmetic for the architecture suffix ARCH (defined by the
 * includer, msm.c, once per code path: portable, and BMI2/ADX with FP_MUL_ASM): the base field,
 * then the G1 (over Fp, 6 words) and G2 (over Fp2, 12 words) curve code. No include guard: it is
 * meant to be included once per ARCH. */
#include "fp_tmpl.h"
#define CURVE g1
#define FEPFX fp_
#define NW 6
#include "curve_tmpl.h"
#undef CURVE
#undef FEPFX
#undef NW
#define CURVE g2
#define FEPFX fp2_
#define NW 12
#include "curve_tmpl.h"
#undef CURVE
#undef FEPFX
#undef NW
