/*
 * SipHash-c-d with 64- and 128-bit output.
 * Aumasson & Bernstein, "SipHash: a fast short-input PRF" (INDOCRYPT 2012); the 128-bit mode
 * follows the reference implementation (github.com/veorq/SipHash): v1 ^= 0xee at initialisation,
 * v2 ^= 0xee before the first finalisation, v1 ^= 0xdd before the second.
 * Scalar, portable C; words are read little-endian regardless of host order.
 */
#include "lt_internal.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                                  \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                     \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                     \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                                  \
    } while (0)

/* Shared compression: absorbs the message; leaves state in v0..v3. Inlined with constant
 * round counts by the callers below so the compiler unrolls the rounds. */
static inline __attribute__((always_inline)) void sip_core(const uint8_t key[16], const uint8_t *in,
                                                           size_t inlen, int c, int outlen128,
                                                           uint64_t v[4]) {
    uint64_t k0 = lt_load_le64(key), k1 = lt_load_le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    if (outlen128) v1 ^= 0xee;
    const uint8_t *end = in + (inlen & ~(size_t)7);
    for (; in != end; in += 8) {
        uint64_t m = lt_load_le64(in);
        v3 ^= m;
        for (int i = 0; i < c; i++) SIPROUND;
        v0 ^= m;
    }
    uint64_t b = ((uint64_t)inlen) << 56;
    switch (inlen & 7) {
    case 7: b |= ((uint64_t)in[6]) << 48; /* fall through */
    case 6: b |= ((uint64_t)in[5]) << 40; /* fall through */
    case 5: b |= ((uint64_t)in[4]) << 32; /* fall through */
    case 4: b |= ((uint64_t)in[3]) << 24; /* fall through */
    case 3: b |= ((uint64_t)in[2]) << 16; /* fall through */
    case 2: b |= ((uint64_t)in[1]) << 8;  /* fall through */
    case 1: b |= ((uint64_t)in[0]); break;
    case 0: break;
    }
    v3 ^= b;
    for (int i = 0; i < c; i++) SIPROUND;
    v0 ^= b;
    v[0] = v0; v[1] = v1; v[2] = v2; v[3] = v3;
}

static inline __attribute__((always_inline)) void sip128(const uint8_t key[16], const uint8_t *in,
                                                         size_t inlen, int c, int d, uint8_t out[16]) {
    uint64_t v[4];
    sip_core(key, in, inlen, c, 1, v);
    uint64_t v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
    v2 ^= 0xee;
    for (int i = 0; i < d; i++) SIPROUND;
    lt_store_le64(out, v0 ^ v1 ^ v2 ^ v3);
    v1 ^= 0xdd;
    for (int i = 0; i < d; i++) SIPROUND;
    lt_store_le64(out + 8, v0 ^ v1 ^ v2 ^ v3);
}

void lt_siphash128(const uint8_t key[16], const uint8_t *msg, size_t len, int c_rounds, int d_rounds,
                   uint8_t out[16]) {
    /* Specialise the two standard parameter sets so their rounds are unrolled. */
    if (c_rounds == 1 && d_rounds == 3)
        sip128(key, msg, len, 1, 3, out);
    else if (c_rounds == 2 && d_rounds == 4)
        sip128(key, msg, len, 2, 4, out);
    else
        sip128(key, msg, len, c_rounds, d_rounds, out);
}

uint64_t lt_siphash64(const uint8_t key[16], const uint8_t *msg, size_t len, int c_rounds, int d_rounds) {
    uint64_t v[4];
    sip_core(key, msg, len, c_rounds, 0, v);
    uint64_t v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
    v2 ^= 0xff;
    for (int i = 0; i < d_rounds; i++) SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- SipHash family ----
 * One message at a time SipHash is a chain of dependent 64-bit adds, rotates and xors, so SIMD only
 * pays across messages: the avx512-mb, avx2-mb and (arm64) neon-mb paths hash 16 / 8 / 4 frames at once
 * in SIMD lanes (siphash_mb.h) through lt_dctx_run_many; single messages on every path use the scalar
 * code. */
static void sip_init(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv) {
    memcpy(c->u.sip.key, key, 16);
    int a = c->algorithm;
    c->u.sip.c = (a == LT_ALG_SIPHASH_1_3_128 || a == LT_ALG_SIPHASH_1_3_64) ? 1 : 2;
    c->u.sip.d = c->u.sip.c == 1 ? 3 : 4;
}

static void sip_digest(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    if (c->out_len == 16)
        lt_siphash128(c->u.sip.key, msg, len, c->u.sip.c, c->u.sip.d, out);
    else
        lt_store_le64(out, lt_siphash64(c->u.sip.key, msg, len, c->u.sip.c, c->u.sip.d));
}

const lt_cpu_impl lt_siphash_impls[] = {
#if LT_X86_PATHS
    {"avx512-mb", lt_cpu_has_avx512_mb, sip_init, sip_digest, lt_siphash_many_avx512},
    {"avx2-mb", lt_cpu_has_avx2, sip_init, sip_digest, lt_siphash_many_avx2},
#endif
#if LT_NEON_PATHS
    {"neon-mb", lt_cpu_has_neon, sip_init, sip_digest, lt_siphash_many_neon},
#endif
    {"portable", NULL, sip_init, sip_digest, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
