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

/* four frames' F values (f) and digests (d), one per 128-bit lane, as F0 d0 F1 d1 | F2 d2 F3 d3:
 * the first `left` (1 to 4) frames' 32 bytes each at out */
static inline void store_fd(uint8_t *out, __m512i f, __m512i d, size_t left) {
    const __m512i lo = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i hi = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    __m512i a = _mm512_permutex2var_epi64(f, lo, d), b = _mm512_permutex2var_epi64(f, hi, d);
    if (left == 4) {
        _mm512_storeu_si512(out, a);
        _mm512_storeu_si512(out + 64, b);
        return;
    }
    _mm512_mask_storeu_epi64(out, (__mmask8)(left >= 2 ? 0xff : 0x0f), a);
    if (left > 2)
        _mm512_mask_storeu_epi64(out + 64, (__mmask8)0x0f, b);
}

/* 16-byte digests: F and the digest of each frame, 32 bytes a frame (F first) */
static void prf_fd(const __m512i k[11], const uint8_t *recs, size_t n, size_t stride, size_t off,
                   uint8_t *out) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i d0 = load4_full(recs, i, stride, off), d1 = load4_full(recs, i + 4, stride, off);
        __m512i d2 = load4_full(recs, i + 8, stride, off), d3 = load4_full(recs, i + 12, stride, off);
        __m512i b0 = _mm512_xor_si512(d0, k[0]), b1 = _mm512_xor_si512(d1, k[0]);
        __m512i b2 = _mm512_xor_si512(d2, k[0]), b3 = _mm512_xor_si512(d3, k[0]);
        for (int r = 1; r < 10; r++)
            R4(_mm512_aesenc_epi128, k[r]);
        R4(_mm512_aesenclast_epi128, k[10]);
        store_fd(out + 32 * i, b0, d0, 4);
        store_fd(out + 32 * i + 128, b1, d1, 4);
        store_fd(out + 32 * i + 256, b2, d2, 4);
        store_fd(out + 32 * i + 384, b3, d3, 4);
    }
    for (; i < n; i += 4) {
        __m512i d = load4(recs, i, n, stride, off), b = _mm512_xor_si512(d, k[0]);
        for (int r = 1; r < 10; r++)
            b = _mm512_aesenc_epi128(b, k[r]);
        b = _mm512_aesenclast_epi128(b, k[10]);
        store_fd(out + 32 * i, b, d, n - i < 4 ? n - i : 4);
    }
}

void lt_window_prf_vaes(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride,
                        size_t off, size_t dsize, uint8_t *out, size_t ostride) {
    __m512i k[11];
    for (int r = 0; r < 11; r++)
        k[r] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(rk + 16 * r)));
    if (ostride == 32) {
        prf_fd(k, recs, n, stride, off, out);
        return;
    }
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

/* Frames [j0, j1) of a chunk (16-byte digests) into the window's sum and table, from f as
 * prf_fd writes it (frame j's F at f + 32 j, its digest after it). Eight frames at a time: their
 * F values' 32-bit limbs summed in 64-bit lanes (*limbs: the sums of limbs 0..3, no carry within
 * a chunk of at most 2^32 frames), their cell offsets computed in one zmm per third (window.c's
 * cell_indices), then each frame's k cells updated as one 32-byte ymm: count + 1 in the first
 * dword, check and digest XORed in, the (0, check, digest) operand one masked load. The offsets
 * go through memory and are read back as scalars, one group ahead: extracting 24 of them from
 * zmm registers costs more shuffle-port work than the cell updates themselves. The rest (under
 * eight) is left to the caller: the frames done are returned. */
/* the cell offsets (bytes) of frames j .. j+7 into off[k][0..7], and their limbs into the sums */
static inline void offsets8(const uint8_t *f, size_t j, __m512i pv, uint32_t part, __m512i *slo,
                            __m512i *shi, uint64_t off[LT_WINDOW_K][8]) {
    const __m512i lo32 = _mm512_set1_epi64(0xffffffff), mask = _mm512_set1_epi64(0x1fffff);
    const __m512i evens = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i fsel = _mm512_set_epi64(13, 12, 9, 8, 5, 4, 1, 0);
    __m512i fa = _mm512_permutex2var_epi64(_mm512_loadu_si512(f + 32 * j), fsel,
                                           _mm512_loadu_si512(f + 32 * j + 64));
    __m512i fb = _mm512_permutex2var_epi64(_mm512_loadu_si512(f + 32 * j + 128), fsel,
                                           _mm512_loadu_si512(f + 32 * j + 192));
    *slo = _mm512_add_epi64(*slo, _mm512_and_si512(fa, lo32));
    *shi = _mm512_add_epi64(*shi, _mm512_srli_epi64(fa, 32));
    *slo = _mm512_add_epi64(*slo, _mm512_and_si512(fb, lo32));
    *shi = _mm512_add_epi64(*shi, _mm512_srli_epi64(fb, 32));
    __m512i x = _mm512_permutex2var_epi64(fa, evens, fb);   /* the eight first words */
    for (unsigned k = 0; k < LT_WINDOW_K; k++) {
        __m512i field = _mm512_and_si512(_mm512_srli_epi64(x, 21 * k), mask);
        __m512i idx = _mm512_add_epi64(_mm512_srli_epi64(_mm512_mul_epu32(field, pv), 21),
                                       _mm512_set1_epi64((long long)k * part));
        _mm512_storeu_si512(off[k], _mm512_slli_epi64(idx, 5));
    }
}

size_t lt_window_cells_avx512(uint8_t *cell, uint32_t part, const uint8_t *base, size_t stride,
                              const uint8_t *f, size_t j0, size_t j1, uint64_t limbs[4]) {
    const __m512i pv = _mm512_set1_epi64(part);
    const __m256i one = _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, 1);
    __m512i slo = _mm512_setzero_si512(), shi = slo;
    /* two groups' offsets: the next group's are stored before this group's cells are updated */
    uint64_t off[2][LT_WINDOW_K][8] __attribute__((aligned(64)));
    size_t j = j0, g = 0;
    if (j + 8 <= j1)
        offsets8(f, j, pv, part, &slo, &shi, off[0]);
    for (; j + 8 <= j1; j += 8, g ^= 1) {
        if (j + 16 <= j1)
            offsets8(f, j + 8, pv, part, &slo, &shi, off[g ^ 1]);
        const volatile uint64_t *o0 = off[g][0], *o1 = off[g][1], *o2 = off[g][2];
        for (unsigned i = 0; i < 8; i++) {
            /* 0, check, digest: F's first word masked off */
            __m256i v = _mm256_maskz_loadu_epi64((__mmask8)0x0e, f + 32 * (j + i));
            __m256i *c0 = (__m256i *)(cell + o0[i]), *c1 = (__m256i *)(cell + o1[i]),
                    *c2 = (__m256i *)(cell + o2[i]);
            __m256i x0 = _mm256_add_epi32(_mm256_load_si256(c0), one);
            _mm256_store_si256(c0, _mm256_xor_si256(x0, v));
            __m256i x1 = _mm256_add_epi32(_mm256_load_si256(c1), one);
            _mm256_store_si256(c1, _mm256_xor_si256(x1, v));
            __m256i x2 = _mm256_add_epi32(_mm256_load_si256(c2), one);
            _mm256_store_si256(c2, _mm256_xor_si256(x2, v));
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
