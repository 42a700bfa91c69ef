/* The window accumulator's element map F (window.c) on AVX-512 VAES: AES-128 of sixteen digests
 * in flight, four 128-bit blocks per zmm instruction (F(d) = AES_k(d) for a 16-byte digest, the
 * fixed-length CBC-MAC AES_k(AES_k(d[0:16]) ^ d[16:32]) for a 32-byte one, exactly as
 * multiset_hash.c's other paths compute it). Each round of four zmm registers is four independent
 * chains, so the VAES unit stays busy; a batch that is not a multiple of sixteen ends with groups
 * of four (a zmm of one to four blocks, the unused lanes computed and not stored).
 *
 * The digests sit `stride` bytes apart in the engine's records, so each zmm is assembled from
 * four 16-byte loads. Constant time: nothing branches on or indexes by the key or the data. */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_X86_PATHS
#include <immintrin.h>

LT_TARGET_BEGIN("avx512f,vaes,aes,sse2")

/* blocks i .. i+3 of the batch at byte `at` of each record (lanes past n - i are zero) */
static inline __m512i load4(const uint8_t *recs, size_t i, size_t n, size_t stride, size_t at) {
    const uint8_t *p = recs + i * stride + at;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    if (i + 1 < n)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + stride)), 1);
    if (i + 2 < n)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 2 * stride)), 2);
    if (i + 3 < n)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 3 * stride)), 3);
    return v;
}

/* four whole blocks */
static inline __m512i load4_full(const uint8_t *recs, size_t i, size_t stride, size_t at) {
    const uint8_t *p = recs + i * stride + at;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + stride)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 2 * stride)), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 3 * stride)), 3);
}

#define R4(op, key)                                                                                \
    do {                                                                                           \
        b0 = op(b0, key), b1 = op(b1, key), b2 = op(b2, key), b3 = op(b3, key);                    \
    } while (0)

void lt_window_prf_vaes(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride,
                        size_t off, size_t dsize, uint8_t *out) {
    __m512i k[11];
    for (int r = 0; r < 11; r++)
        k[r] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(rk + 16 * r)));
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i b0 = _mm512_setzero_si512(), b1 = b0, b2 = b0, b3 = b0;
        for (size_t kk = 0; kk < dsize; kk += 16) {   /* CBC-MAC: the first chaining value is 0 */
            b0 = _mm512_xor_si512(b0, load4_full(recs, i, stride, off + kk));
            b1 = _mm512_xor_si512(b1, load4_full(recs, i + 4, stride, off + kk));
            b2 = _mm512_xor_si512(b2, load4_full(recs, i + 8, stride, off + kk));
            b3 = _mm512_xor_si512(b3, load4_full(recs, i + 12, stride, off + kk));
            R4(_mm512_xor_si512, k[0]);
            for (int r = 1; r < 10; r++)
                R4(_mm512_aesenc_epi128, k[r]);
            R4(_mm512_aesenclast_epi128, k[10]);
        }
        _mm512_storeu_si512(out + 16 * i, b0);
        _mm512_storeu_si512(out + 16 * i + 64, b1);
        _mm512_storeu_si512(out + 16 * i + 128, b2);
        _mm512_storeu_si512(out + 16 * i + 192, b3);
    }
    for (; i < n; i += 4) {   /* the last one to fifteen, four lanes at a time */
        __m512i b = _mm512_setzero_si512();
        for (size_t kk = 0; kk < dsize; kk += 16) {
            b = _mm512_xor_si512(b, load4(recs, i, n, stride, off + kk));
            b = _mm512_xor_si512(b, k[0]);
            for (int r = 1; r < 10; r++)
                b = _mm512_aesenc_epi128(b, k[r]);
            b = _mm512_aesenclast_epi128(b, k[10]);
        }
        size_t left = n - i < 4 ? n - i : 4;
        _mm512_mask_storeu_epi64(out + 16 * i, (__mmask8)((1u << (2 * left)) - 1), b);
    }
}

LT_TARGET_END

LT_TARGET_BEGIN("avx512f,avx512vl,avx2,sse2")

/* Frames [j0, j1) of a chunk (16-byte digests) into the window's sum and table: F values f (16
 * bytes each, indexed by the frame's place in the chunk), the digests in the records at base.
 * Eight frames at a time: their F values' 32-bit limbs summed in 64-bit lanes (*limbs: the sums
 * of limbs 0..3, no carry within a chunk of at most 2^32 frames), their cell offsets computed in
 * one zmm per third (window.c's cell_indices), then each of the eight frames' k cells updated as
 * one 32-byte ymm: count + 1 in the first dword, check and digest XORed in. The rest (under
 * eight) is left to the caller: the frames done are returned. */
size_t lt_window_cells_avx512(uint8_t *cell, uint32_t part, const uint8_t *base, size_t stride,
                              const uint8_t *f, size_t j0, size_t j1, uint64_t limbs[4]) {
    const __m512i lo32 = _mm512_set1_epi64(0xffffffff), mask = _mm512_set1_epi64(0x1fffff);
    const __m512i evens = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i pv = _mm512_set1_epi64(part);
    const __m256i one = _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, 1);
    __m512i slo = _mm512_setzero_si512(), shi = slo;
    uint64_t off[LT_WINDOW_K][8];
    size_t j = j0;
    for (; j + 8 <= j1; j += 8) {
        __m512i fa = _mm512_loadu_si512(f + 16 * j), fb = _mm512_loadu_si512(f + 16 * j + 64);
        slo = _mm512_add_epi64(slo, _mm512_and_si512(fa, lo32));
        shi = _mm512_add_epi64(shi, _mm512_srli_epi64(fa, 32));
        slo = _mm512_add_epi64(slo, _mm512_and_si512(fb, lo32));
        shi = _mm512_add_epi64(shi, _mm512_srli_epi64(fb, 32));
        __m512i x = _mm512_permutex2var_epi64(fa, evens, fb);   /* the eight first words */
        for (unsigned k = 0; k < LT_WINDOW_K; k++) {
            __m512i field = _mm512_and_si512(_mm512_srli_epi64(x, 21 * k), mask);
            __m512i idx = _mm512_add_epi64(_mm512_srli_epi64(_mm512_mul_epu32(field, pv), 21),
                                           _mm512_set1_epi64((long long)k * part));
            _mm512_storeu_si512(off[k], _mm512_slli_epi64(idx, 5));
        }
        for (unsigned i = 0; i < 8; i++) {
            __m128i fv = _mm_loadu_si128((const __m128i *)(f + 16 * (j + i)));
            const uint8_t *r = base + (j + i) * stride;
            __m128i d = _mm_loadu_si128((const __m128i *)(r + LT_RECORD_FIXED));
            __m256i v = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_unpackhi_epi64(_mm_setzero_si128(), fv)), d, 1);
            for (unsigned k = 0; k < LT_WINDOW_K; k++) {
                __m256i *c = (__m256i *)(cell + off[k][i]);
                __m256i x = _mm256_add_epi32(_mm256_loadu_si256(c), one);
                _mm256_storeu_si256(c, _mm256_xor_si256(x, v));
            }
        }
    }
    /* lanes 0, 2, 4, 6 hold first words, 1, 3, 5, 7 second words */
    uint64_t a[8], b[8];
    _mm512_storeu_si512(a, slo);
    _mm512_storeu_si512(b, shi);
    limbs[0] = a[0] + a[2] + a[4] + a[6], limbs[1] = b[0] + b[2] + b[4] + b[6];
    limbs[2] = a[1] + a[3] + a[5] + a[7], limbs[3] = b[1] + b[3] + b[5] + b[7];
    return j - j0;
}

LT_TARGET_END
#endif
