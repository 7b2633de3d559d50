/* Included after `#pragma GCC target("bmi2,adx")`: products by mulx, carries by adcx. */
#undef MUL64
#undef ADDC
#define MUL64(hi, lo, x, y) ((lo) = _mulx_u64((x), (y), (unsigned long long *)&(hi)))
#define ADDC(c, x, y, out) _addcarryx_u64((c), (x), (y), (unsigned long long *)(out))
