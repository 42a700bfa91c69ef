/*
 * Multi-buffer keyed BLAKE3 on AVX2: eight chunks or parent nodes (of one frame or several) in the
 * eight 32-bit lanes of ymm registers; rotations by 16 and 8 are byte shuffles, by 12 and 7
 * shift/shift/or; blocks are loaded 32 bytes at a time and transposed (two 8 x 8 transposes of
 * 32-bit words per block). The lane scheme is in blake3_mb.h.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_X86_PATHS
#include <immintrin.h>

LT_TARGET_BEGIN("avx2")

/* rows r[0..7] of eight 32-bit words -> columns r[0..7] (r[w] lane l = old r[l] word w) */
static inline __attribute__((always_inline)) void b3x8_transpose(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);      /* w0 w0 w1 w1 | w4 w4 w5 w5 */
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);  /* w2 w2 w3 w3 | w6 w6 w7 w7 */
    }
    for (int g = 0; g < 8; g += 4) {
        u[g + 0] = _mm256_unpacklo_epi64(t[g + 0], t[g + 2]);  /* w0 of 4 rows | w4 */
        u[g + 1] = _mm256_unpackhi_epi64(t[g + 0], t[g + 2]);  /* w1 | w5 */
        u[g + 2] = _mm256_unpacklo_epi64(t[g + 1], t[g + 3]);  /* w2 | w6 */
        u[g + 3] = _mm256_unpackhi_epi64(t[g + 1], t[g + 3]);  /* w3 | w7 */
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

static inline __attribute__((always_inline)) void b3x8_load_msg(const uint8_t *const *bp, __m256i m[16]) {
    __m256i lo[8], hi[8];
    for (int l = 0; l < 8; l++) {
        lo[l] = _mm256_loadu_si256((const __m256i *)bp[l]);
        hi[l] = _mm256_loadu_si256((const __m256i *)(bp[l] + 32));
    }
    b3x8_transpose(lo);
    b3x8_transpose(hi);
    for (int w = 0; w < 8; w++) {
        m[w] = lo[w];
        m[8 + w] = hi[w];
    }
}

static inline __attribute__((always_inline)) void b3x8_store_cv(const __m256i cv[8], uint32_t rows[8][8]) {
    __m256i r[8];
    for (int i = 0; i < 8; i++) r[i] = cv[i];
    b3x8_transpose(r);
    for (int l = 0; l < 8; l++) _mm256_storeu_si256((__m256i *)rows[l], r[l]);
}

#define B3X8_ROT16(x) _mm256_shuffle_epi8((x), _mm256_set_epi8(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2, \
                                                               13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2))
#define B3X8_ROT8(x) _mm256_shuffle_epi8((x), _mm256_set_epi8(12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, 1, \
                                                              12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, 1))

#define MB_NAME lt_blake3_many_avx2
#define MB_LANES 8
#define MB_V __m256i
#define V_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), (v))
#define V_SPLAT(x) _mm256_set1_epi32((int)(x))
#define V_ADD(a, b) _mm256_add_epi32((a), (b))
#define V_XOR(a, b) _mm256_xor_si256((a), (b))
#define V_ROT16(x) B3X8_ROT16(x)
#define V_ROT8(x) B3X8_ROT8(x)
#define V_ROT12(x) _mm256_or_si256(_mm256_srli_epi32((x), 12), _mm256_slli_epi32((x), 20))
#define V_ROT7(x) _mm256_or_si256(_mm256_srli_epi32((x), 7), _mm256_slli_epi32((x), 25))
#define MB_LOAD_MSG(bp, m) b3x8_load_msg((bp), (m))
#define MB_STORE_CV(cv, rows) b3x8_store_cv((cv), (rows))
#include "blake3_mb.h"

LT_TARGET_END
#endif
