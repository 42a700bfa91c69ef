/*
 * Multi-buffer keyed BLAKE3 on AVX-512F/VL: sixteen chunks or parent nodes (of one frame or
 * several) in the sixteen 32-bit lanes of zmm registers; every rotation is one vprord; blocks are
 * loaded whole and transposed (a 16 x 16 transpose of 32-bit words per block). The lane scheme is
 * in blake3_mb.h.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_X86_PATHS
#include <immintrin.h>

LT_TARGET_BEGIN("avx512f,avx512vl,avx2")

/* 16 x 16 transpose of 32-bit words: r[l] = block of lane l -> m[w] = word w of every lane */
static inline __attribute__((always_inline)) void b3x16_load_msg(const uint8_t *const *bp, __m512i m[16]) {
    __m512i r[16], t[16], s[16];
    for (int l = 0; l < 16; l++) r[l] = _mm512_loadu_si512((const void *)bp[l]);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);      /* per 128-bit chunk k: w4k, w4k+1 of 2 rows */
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);  /* w4k+2, w4k+3 */
    }
    /* s[4g + j], chunk k: word 4k + j of rows 4g .. 4g + 3 */
    for (int g = 0; g < 4; g++) {
        s[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g + 0], t[4 * g + 2]);
        s[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g + 0], t[4 * g + 2]);
        s[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        s[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    /* 4 x 4 transpose of 128-bit chunks across s[j], s[4 + j], s[8 + j], s[12 + j] */
    for (int j = 0; j < 4; j++) {
        __m512i a = _mm512_shuffle_i32x4(s[j], s[4 + j], 0x44);      /* s0c0 s0c1 s1c0 s1c1 */
        __m512i b = _mm512_shuffle_i32x4(s[j], s[4 + j], 0xEE);      /* s0c2 s0c3 s1c2 s1c3 */
        __m512i c = _mm512_shuffle_i32x4(s[8 + j], s[12 + j], 0x44);
        __m512i d = _mm512_shuffle_i32x4(s[8 + j], s[12 + j], 0xEE);
        m[0 + j] = _mm512_shuffle_i32x4(a, c, 0x88);   /* chunk 0 of each: word j */
        m[4 + j] = _mm512_shuffle_i32x4(a, c, 0xDD);   /* chunk 1: word 4 + j */
        m[8 + j] = _mm512_shuffle_i32x4(b, d, 0x88);
        m[12 + j] = _mm512_shuffle_i32x4(b, d, 0xDD);
    }
}

/* rows r[0..7] of eight 32-bit words (ymm) -> columns */
static inline __attribute__((always_inline)) void b3x16_transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) {
        u[g + 0] = _mm256_unpacklo_epi64(t[g + 0], t[g + 2]);
        u[g + 1] = _mm256_unpackhi_epi64(t[g + 0], t[g + 2]);
        u[g + 2] = _mm256_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm256_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

/* cv[i] lanes 0-7 and 8-15 transposed separately */
static inline __attribute__((always_inline)) void b3x16_store_cv(const __m512i cv[8], uint32_t rows[16][8]) {
    __m256i lo[8], hi[8];
    for (int i = 0; i < 8; i++) {
        lo[i] = _mm512_castsi512_si256(cv[i]);
        hi[i] = _mm512_extracti64x4_epi64(cv[i], 1);
    }
    b3x16_transpose8(lo);
    b3x16_transpose8(hi);
    for (int l = 0; l < 8; l++) {
        _mm256_storeu_si256((__m256i *)rows[l], lo[l]);
        _mm256_storeu_si256((__m256i *)rows[8 + l], hi[l]);
    }
}

#define MB_NAME lt_blake3_many_avx512
#define MB_LANES 16
#define MB_V __m512i
#define V_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define V_STORE(p, v) _mm512_storeu_si512((void *)(p), (v))
#define V_SPLAT(x) _mm512_set1_epi32((int)(x))
#define V_ADD(a, b) _mm512_add_epi32((a), (b))
#define V_XOR(a, b) _mm512_xor_si512((a), (b))
#define V_ROT16(x) _mm512_ror_epi32((x), 16)
#define V_ROT12(x) _mm512_ror_epi32((x), 12)
#define V_ROT8(x) _mm512_ror_epi32((x), 8)
#define V_ROT7(x) _mm512_ror_epi32((x), 7)
#define MB_LOAD_MSG(bp, m) b3x16_load_msg((bp), (m))
#define MB_STORE_CV(cv, rows) b3x16_store_cv((cv), (rows))
#include "blake3_mb.h"

LT_TARGET_END
#endif
