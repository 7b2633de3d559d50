// BLS12-381's base field Fq as a field traits struct for field.cuh (a second curve, e.g. BN254,
// is another such struct: its limbs, N0INV and R mod p).
#pragma once
#include "field.cuh"

struct Bls12381Fq {
    static constexpr int N = 12;
    static constexpr u32 N0INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    static CZ_HD u32 mod(int i) {
        constexpr u32 p[12] = {0xffffaaabu, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu,
                               0xf6b0f624u, 0x6730d2a0u, 0xf38512bfu, 0x64774b84u,
                               0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau};
        return p[i];
    }
    static CZ_HD u32 one(int i) {  // R = 2^384 mod p
        constexpr u32 r[12] = {0x0002fffdu, 0x76090000u, 0xc40c0002u, 0xebf4000bu,
                               0x53c758bau, 0x5f489857u, 0x70525745u, 0x77ce5853u,
                               0xa256ec6du, 0x5c071a97u, 0xfa80e493u, 0x15f65ec3u};
        return r[i];
    }
};

typedef Fp<Bls12381Fq> Fq;
typedef Fp2<Bls12381Fq> Fq2;

// BLS12-381's scalar field Fr (255 bits in 256: the top bit is spare, not two), for the NTT and
// the H pipeline (ntt.cuh). field.cuh's arithmetic needs p < 2^(32N - 1) only (see its header),
// which Fr meets: r's top limb is 0x73eda753 < 2^31.
struct Bls12381Fr {
    static constexpr int N = 8;
    static constexpr u32 N0INV = 0xffffffffu;  // -r^-1 mod 2^32
    static CZ_HD u32 mod(int i) {
        constexpr u32 p[8] = {0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
                              0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};
        return p[i];
    }
    static CZ_HD u32 one(int i) {  // R = 2^256 mod r
        constexpr u32 r[8] = {0xfffffffeu, 0x00000001u, 0x00034802u, 0x5884b7fau,
                              0xecbc4ff5u, 0x998c4fefu, 0xacc5056fu, 0x1824b159u};
        return r[i];
    }
};

typedef Fp<Bls12381Fr> Fr;
