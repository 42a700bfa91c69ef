/*
 * AES-128-GMAC: the GCM tag (NIST SP 800-38D) of an empty plaintext with the frame as additional
 * authenticated data: tag = GHASH_H(A || 0-pad || [len(A)]_64 || [0]_64) XOR E_K(J0), with
 * H = E_K(0^128) and J0 = IV || 0^31 || 1. The ledger always uses the all-zero 96-bit IV (see
 * docs/algorithms.md for what that costs); the test entry point takes any 96-bit IV.
 *
 * Everything that depends on the key only (round keys, H, E_K(J0), powers of H) is computed once
 * per context, so the per-frame work is GHASH over the frame.
 *
 * Paths:
 *   portable      table-free, constant-time AES (S-box computed as x^254 in GF(2^8) followed by the
 *                 affine map, eight bytes at a time in 64-bit words) and a bit-serial GHASH with
 *                 masks instead of branches. Slow (about 10x the others) but leaks no key-dependent
 *                 timing through tables or branches.
 *   aesni-pclmul  AES-NI for the key-only blocks, PCLMULQDQ GHASH over four blocks per reduction
 *                 (Gueron & Kounavis, Intel white paper "Intel Carry-Less Multiplication Instruction
 *                 and its Usage for Computing the GCM Mode", algorithm with bit-reflected operands).
 *   vpclmul-avx512-mb  AES-NI key setup as above, then multi-frame GHASH on zmm registers: see
 *                 digest_gmac_avx512.c (listed first in lt_gmac_impls, so CPUID picks it where it runs).
 */
#include "ledgertool.h"
#include "lt_internal.h"

/* ---- portable AES-128 (FIPS 197), constant time ---- */
#define LANES01 0x0101010101010101ull

static inline uint64_t xtime8(uint64_t a) {
    return ((a & 0x7f7f7f7f7f7f7f7full) << 1) ^ (((a >> 7) & LANES01) * 0x1b);
}

static uint64_t gfmul8(uint64_t a, uint64_t b) {   /* eight independent GF(2^8) products */
    uint64_t r = 0;
    for (int i = 0; i < 8; i++) {
        r ^= a & (((b >> i) & LANES01) * 0xff);
        a = xtime8(a);
    }
    return r;
}

static inline uint64_t rotl8(uint64_t b, int k) {   /* rotate every byte left by k bits */
    uint64_t lo_mask = LANES01 * (uint64_t)((0xffu << k) & 0xffu);
    uint64_t hi_mask = LANES01 * (uint64_t)(0xffu >> (8 - k));
    return ((b << k) & lo_mask) | ((b >> (8 - k)) & hi_mask);
}

static uint64_t sbox8(uint64_t x) {  /* S-box of eight bytes: affine(x^254); 0 maps to 0x63 */
    uint64_t x2 = gfmul8(x, x), x3 = gfmul8(x2, x), x6 = gfmul8(x3, x3), x12 = gfmul8(x6, x6);
    uint64_t x15 = gfmul8(x12, x3), x30 = gfmul8(x15, x15), x60 = gfmul8(x30, x30);
    uint64_t x120 = gfmul8(x60, x60), x240 = gfmul8(x120, x120), x252 = gfmul8(x240, x12);
    uint64_t inv = gfmul8(x252, x2);
    return inv ^ rotl8(inv, 1) ^ rotl8(inv, 2) ^ rotl8(inv, 3) ^ rotl8(inv, 4) ^ (LANES01 * 0x63);
}

void lt_aes128_expand(const uint8_t key[16], uint8_t rk[176]) {
    static const uint8_t rcon[10] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36};
    memcpy(rk, key, 16);
    for (int i = 4; i < 44; i++) {
        uint8_t t[4];
        memcpy(t, rk + 4 * (i - 1), 4);
        if (i % 4 == 0) {
            uint64_t w = (uint64_t)t[1] | ((uint64_t)t[2] << 8) | ((uint64_t)t[3] << 16) | ((uint64_t)t[0] << 24);
            w = sbox8(w);
            t[0] = (uint8_t)w ^ rcon[i / 4 - 1];
            t[1] = (uint8_t)(w >> 8);
            t[2] = (uint8_t)(w >> 16);
            t[3] = (uint8_t)(w >> 24);
        }
        for (int k = 0; k < 4; k++) rk[4 * i + k] = rk[4 * (i - 4) + k] ^ t[k];
    }
}

static inline uint64_t rot_col(uint64_t x) {  /* in each 4-byte column: byte r <- byte r+1 */
    return ((x >> 8) & 0x00ffffff00ffffffull) | ((x << 24) & 0xff000000ff000000ull);
}

void lt_aes128_encrypt_portable(const uint8_t rk[176], const uint8_t in[16], uint8_t out[16]) {
    uint8_t s[16], t[16];
    for (int i = 0; i < 16; i++) s[i] = in[i] ^ rk[i];
    for (int round = 1; round <= 10; round++) {
        uint64_t w0 = sbox8(lt_load_le64(s)), w1 = sbox8(lt_load_le64(s + 8));
        lt_store_le64(t, w0);
        lt_store_le64(t + 8, w1);
        for (int c = 0; c < 4; c++)       /* ShiftRows: row r moves left by r columns */
            for (int r = 0; r < 4; r++) s[r + 4 * c] = t[r + 4 * ((c + r) & 3)];
        if (round < 10) {                 /* MixColumns: b_r = 2a_r + 3a_{r+1} + a_{r+2} + a_{r+3} */
            for (int h = 0; h < 16; h += 8) {
                uint64_t x = lt_load_le64(s + h), t1 = rot_col(x), t2 = rot_col(t1), t3 = rot_col(t2);
                lt_store_le64(s + h, xtime8(x) ^ xtime8(t1) ^ t1 ^ t2 ^ t3);
            }
        }
        for (int i = 0; i < 16; i++) s[i] ^= rk[16 * round + i];
    }
    memcpy(out, s, 16);
}

/* ---- portable GHASH, bit-serial with masks (SP 800-38D, algorithm 1) ---- */
static void gf128_mul(uint64_t *xh, uint64_t *xl, uint64_t hh, uint64_t hl) {
    uint64_t zh = 0, zl = 0, vh = hh, vl = hl, x = *xh;
    for (int i = 0; i < 128; i++) {
        if (i == 64) x = *xl;
        uint64_t m = 0 - ((x >> (63 - (i & 63))) & 1);
        zh ^= vh & m;
        zl ^= vl & m;
        uint64_t carry = 0 - (vl & 1);
        vl = (vl >> 1) | (vh << 63);
        vh = (vh >> 1) ^ (0xe100000000000000ull & carry);
    }
    *xh = zh;
    *xl = zl;
}

static void gmac_finish_block(uint8_t tag[16], uint64_t xh, uint64_t xl, const uint8_t ek_j0[16]) {
    lt_store_be64(tag, xh);
    lt_store_be64(tag + 8, xl);
    for (int i = 0; i < 16; i++) tag[i] ^= ek_j0[i];
}

static void gmac_j0(const uint8_t *iv, uint8_t j0[16]) {
    memset(j0, 0, 16);
    if (iv) memcpy(j0, iv, 12);
    j0[15] = 1;
}

static void gmac_init_portable(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv) {
    uint8_t zero[16] = {0}, j0[16];
    lt_aes128_expand(key, c->u.gmac.rk);
    lt_aes128_encrypt_portable(c->u.gmac.rk, zero, c->u.gmac.h);
    gmac_j0(iv, j0);
    lt_aes128_encrypt_portable(c->u.gmac.rk, j0, c->u.gmac.ek_j0);
    c->u.gmac.hpow[0][0] = lt_load_be64(c->u.gmac.h);
    c->u.gmac.hpow[0][1] = lt_load_be64(c->u.gmac.h + 8);
}

static void gmac_digest_portable(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    uint64_t xh = 0, xl = 0, hh = c->u.gmac.hpow[0][0], hl = c->u.gmac.hpow[0][1];
    size_t off = 0;
    for (; off + 16 <= len; off += 16) {
        xh ^= lt_load_be64(msg + off);
        xl ^= lt_load_be64(msg + off + 8);
        gf128_mul(&xh, &xl, hh, hl);
    }
    if (off < len) {
        uint8_t last[16] = {0};
        memcpy(last, msg + off, len - off);
        xh ^= lt_load_be64(last);
        xl ^= lt_load_be64(last + 8);
        gf128_mul(&xh, &xl, hh, hl);
    }
    xh ^= (uint64_t)len * 8;  /* [len(A)]_64 || [len(C) = 0]_64 */
    gf128_mul(&xh, &xl, hh, hl);
    gmac_finish_block(out, xh, xl, c->u.gmac.ek_j0);
}

/* ---- AES-NI + PCLMULQDQ ---- */
#if LT_X86_PATHS
#include <immintrin.h>

#define TGT __attribute__((target("aes,pclmul,sse2,ssse3")))

TGT static inline __m128i bswap128(__m128i x) {
    return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

TGT static void aesni_encrypt(const uint8_t rk[176], const uint8_t in[16], uint8_t out[16]) {
    __m128i b = _mm_xor_si128(_mm_loadu_si128((const __m128i *)in), _mm_loadu_si128((const __m128i *)rk));
    for (int r = 1; r < 10; r++) b = _mm_aesenc_si128(b, _mm_loadu_si128((const __m128i *)(rk + 16 * r)));
    b = _mm_aesenclast_si128(b, _mm_loadu_si128((const __m128i *)(rk + 160)));
    _mm_storeu_si128((__m128i *)out, b);
}

/* Accumulate the unreduced 256-bit carry-less product a*b as lo, mid (cross terms), hi. */
TGT static inline void clmul_acc(__m128i a, __m128i b, __m128i *lo, __m128i *mid, __m128i *hi) {
    *lo = _mm_xor_si128(*lo, _mm_clmulepi64_si128(a, b, 0x00));
    *hi = _mm_xor_si128(*hi, _mm_clmulepi64_si128(a, b, 0x11));
    *mid = _mm_xor_si128(*mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10)));
}

/* Reduce a product of byte-reversed (bit-reflected) operands modulo x^128 + x^7 + x^2 + x + 1:
 * shift the 256-bit value left by one bit (reflection), then fold the low half twice. */
TGT static inline __m128i gf_reduce(__m128i lo, __m128i mid, __m128i hi) {
    lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
    hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
    __m128i c_lo = _mm_srli_epi32(lo, 31), c_hi = _mm_srli_epi32(hi, 31);
    lo = _mm_slli_epi32(lo, 1);
    hi = _mm_slli_epi32(hi, 1);
    __m128i cross = _mm_srli_si128(c_lo, 12);
    c_hi = _mm_slli_si128(c_hi, 4);
    c_lo = _mm_slli_si128(c_lo, 4);
    lo = _mm_or_si128(lo, c_lo);
    hi = _mm_or_si128(_mm_or_si128(hi, c_hi), cross);
    __m128i a = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(lo, 31), _mm_slli_epi32(lo, 30)), _mm_slli_epi32(lo, 25));
    __m128i carry = _mm_srli_si128(a, 4);
    lo = _mm_xor_si128(lo, _mm_slli_si128(a, 12));
    __m128i b = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(lo, 1), _mm_srli_epi32(lo, 2)), _mm_srli_epi32(lo, 7));
    b = _mm_xor_si128(b, carry);
    lo = _mm_xor_si128(lo, b);
    return _mm_xor_si128(hi, lo);
}

TGT static inline __m128i gf_mul(__m128i a, __m128i b) {
    __m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
    clmul_acc(a, b, &lo, &mid, &hi);
    return gf_reduce(lo, mid, hi);
}

/* also the first half of vpclmul-avx512-mb's key setup (gmac_init_vpclmul512), which then replaces hpow */
TGT static void gmac_init_aesni(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv) {
    uint8_t zero[16] = {0}, j0[16];
    lt_aes128_expand(key, c->u.gmac.rk);   /* portable and constant time; runs once per key */
    aesni_encrypt(c->u.gmac.rk, zero, c->u.gmac.h);
    gmac_j0(iv, j0);
    aesni_encrypt(c->u.gmac.rk, j0, c->u.gmac.ek_j0);
    __m128i *hp = (__m128i *)c->u.gmac.hpow;   /* hp[i] = H^(i+1), byte-reversed */
    hp[0] = bswap128(_mm_loadu_si128((const __m128i *)c->u.gmac.h));
    for (int i = 1; i < 4; i++) hp[i] = gf_mul(hp[i - 1], hp[0]);
}

TGT static void gmac_digest_aesni(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    const __m128i *hp = (const __m128i *)c->u.gmac.hpow;
    __m128i x = _mm_setzero_si128();
    size_t off = 0;
    for (; off + 64 <= len; off += 64) {
        __m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
        __m128i b0 = _mm_xor_si128(x, bswap128(_mm_loadu_si128((const __m128i *)(msg + off))));
        clmul_acc(b0, hp[3], &lo, &mid, &hi);
        clmul_acc(bswap128(_mm_loadu_si128((const __m128i *)(msg + off + 16))), hp[2], &lo, &mid, &hi);
        clmul_acc(bswap128(_mm_loadu_si128((const __m128i *)(msg + off + 32))), hp[1], &lo, &mid, &hi);
        clmul_acc(bswap128(_mm_loadu_si128((const __m128i *)(msg + off + 48))), hp[0], &lo, &mid, &hi);
        x = gf_reduce(lo, mid, hi);
    }
    for (; off + 16 <= len; off += 16)
        x = gf_mul(_mm_xor_si128(x, bswap128(_mm_loadu_si128((const __m128i *)(msg + off)))), hp[0]);
    if (off < len) {
        uint8_t last[16] = {0};
        memcpy(last, msg + off, len - off);
        x = gf_mul(_mm_xor_si128(x, bswap128(_mm_loadu_si128((const __m128i *)last))), hp[0]);
    }
    /* length block [len(A)*8]_64 || [0]_64, byte-reversed: the bit count sits in the high lane */
    x = gf_mul(_mm_xor_si128(x, _mm_set_epi64x((long long)((uint64_t)len * 8), 0)), hp[0]);
    __m128i tag = _mm_xor_si128(bswap128(x), _mm_loadu_si128((const __m128i *)c->u.gmac.ek_j0));
    _mm_storeu_si128((__m128i *)out, tag);
}
#endif

#if LT_X86_PATHS
static void gmac_init_vpclmul512(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv) {
    gmac_init_aesni(c, key, key_len, iv);  /* round keys, H, AES_K(J0) */
    lt_gmac_powers_vpclmul512(c);
}
#endif

const lt_cpu_impl lt_gmac_impls[] = {
#if LT_X86_PATHS
    {"vpclmul-avx512-mb", lt_cpu_has_vpclmul_avx512, gmac_init_vpclmul512, lt_gmac_digest_vpclmul512,
     lt_gmac_many_vpclmul512},
    {"aesni-pclmul", lt_cpu_has_aesni_pclmul, gmac_init_aesni, gmac_digest_aesni, NULL},
#endif
    {"portable", NULL, gmac_init_portable, gmac_digest_portable, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
