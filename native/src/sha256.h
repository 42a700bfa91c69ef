/*
 * SHA-256 (FIPS 180-4) for the two native users, HMAC-SHA-256 (digest_hmac.c) and the Merkle
 * leaves and tree hash (merkle.c): the compression function on two paths and the padding.
 *   portable  plain C (FIPS 180-4 section 6.2.2)
 *   sha-ni    Intel SHA extensions (SHA256RNDS2 / SHA256MSG1 / SHA256MSG2), state kept as the
 *             ABEF / CDGH register pair the instructions expect
 * Static inline in a header (like blake3_mb.h), so each user's per-frame loop calls the
 * compression function directly, as it did when it was one file.
 */
#ifndef LT_SHA256_H
#define LT_SHA256_H

#include "lt_internal.h"

static const uint32_t SHA256_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static const uint32_t SHA256_H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

/* Compress `n` consecutive 64-byte blocks into `state`. */
typedef void (*sha256_blocks_fn)(uint32_t state[8], const uint8_t *blocks, size_t n);

static inline uint32_t sha256_ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static inline void sha256_blocks_portable(uint32_t st[8], const uint8_t *p, size_t n) {
    for (; n; n--, p += 64) {
        uint32_t w[64];
        for (int t = 0; t < 16; t++) w[t] = lt_load_be32(p + 4 * t);
        for (int t = 16; t < 64; t++) {
            uint32_t s0 = sha256_ror(w[t - 15], 7) ^ sha256_ror(w[t - 15], 18) ^ (w[t - 15] >> 3);
            uint32_t s1 = sha256_ror(w[t - 2], 17) ^ sha256_ror(w[t - 2], 19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        uint32_t a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6], h = st[7];
        for (int t = 0; t < 64; t++) {
            uint32_t t1 = h + (sha256_ror(e, 6) ^ sha256_ror(e, 11) ^ sha256_ror(e, 25)) + ((e & f) ^ (~e & g)) +
                          SHA256_K[t] + w[t];
            uint32_t t2 = (sha256_ror(a, 2) ^ sha256_ror(a, 13) ^ sha256_ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
        }
        st[0] += a; st[1] += b; st[2] += c; st[3] += d; st[4] += e; st[5] += f; st[6] += g; st[7] += h;
    }
}

#if LT_X86_PATHS
#include <immintrin.h>

__attribute__((target("sha,sse4.1,ssse3")))
static inline void sha256_blocks_shani(uint32_t st[8], const uint8_t *p, size_t n) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    __m128i dcba = _mm_loadu_si128((const __m128i *)st), hgfe = _mm_loadu_si128((const __m128i *)(st + 4));
    __m128i badc = _mm_shuffle_epi32(dcba, 0xB1), efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(badc, efgh, 8);     /* lanes F,E,B,A */
    __m128i cdgh = _mm_blend_epi16(efgh, badc, 0xF0);  /* lanes H,G,D,C */
    for (; n; n--, p += 64) {
        __m128i save_abef = abef, save_cdgh = cdgh, m[4];
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
            __m128i w;
            if (g < 4) {
                w = m[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
            } else {
                __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(m[g & 3], m[(g + 1) & 3]),
                                          _mm_alignr_epi8(m[(g + 3) & 3], m[(g + 2) & 3], 4));
                w = m[g & 3] = _mm_sha256msg2_epu32(t, m[(g + 3) & 3]);
            }
            __m128i wk = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)(SHA256_K + 4 * g)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, save_abef);
        cdgh = _mm_add_epi32(cdgh, save_cdgh);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B), ghcd = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)st, _mm_blend_epi16(feba, ghcd, 0xF0));
    _mm_storeu_si128((__m128i *)(st + 4), _mm_alignr_epi8(ghcd, feba, 8));
}
#endif

/* SHA-256 of `prefix_blocks` already compressed into `st` followed by `msg`: padding and length. */
static inline void sha256_finish(sha256_blocks_fn blocks, uint32_t st[8], uint64_t prefix_bytes,
                                 const uint8_t *msg, size_t len, uint8_t out[32]) {
    size_t whole = len / 64;
    if (whole) blocks(st, msg, whole);
    uint8_t tail[128] = {0};
    size_t rest = len - whole * 64;
    if (rest) memcpy(tail, msg + whole * 64, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest + 9 <= 64 ? 64 : 128;
    lt_store_be64(tail + tail_len - 8, (prefix_bytes + (uint64_t)len) * 8);
    blocks(st, tail, tail_len / 64);
    for (int i = 0; i < 8; i++) lt_store_be32(out + 4 * i, st[i]);
    memset(tail, 0, sizeof tail);
}

/* RFC 9162 leaf hash SHA-256(0x00 || p[0..len)). The 0x00 prefix shifts the message by one byte,
 * so the first 63 bytes go through a 64-byte staging block and the aligned rest is consumed in place. */
static inline void sha256_leaf(sha256_blocks_fn blocks, const uint8_t *p, size_t len, uint8_t out[32]) {
    uint8_t first[64];
    uint32_t st[8];
    memcpy(st, SHA256_H0, sizeof st);
    first[0] = 0x00;
    if (len >= 63) {
        memcpy(first + 1, p, 63);
        blocks(st, first, 1);
        sha256_finish(blocks, st, 64, p + 63, len - 63, out);
    } else {
        memcpy(first + 1, p, len);
        sha256_finish(blocks, st, 0, first, len + 1, out);
    }
}

#endif
