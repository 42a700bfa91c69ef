/*
 * Multi-buffer SipHash on AVX2: eight messages in two ymm registers of four 64-bit lanes each (the
 * two halves are independent dependency chains for the out-of-order core); rotates are
 * shift/shift/or (AVX2 has no 64-bit rotate) except by 32 and 16 (a dword or byte shuffle); whole words come from
 * masked gathers. The lane scheme is in siphash_mb.h.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_X86_PATHS
#include <immintrin.h>

LT_TARGET_BEGIN("avx2")

typedef struct { __m256i lo, hi; } mb2_v;

static inline mb2_v mb2_load(const uint64_t *p) {
    return (mb2_v){_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)(p + 4))};
}
static inline void mb2_store(uint64_t *p, mb2_v v) {
    _mm256_storeu_si256((__m256i *)p, v.lo);
    _mm256_storeu_si256((__m256i *)(p + 4), v.hi);
}
static inline mb2_v mb2_splat(uint64_t x) {
    __m256i s = _mm256_set1_epi64x((long long)x);
    return (mb2_v){s, s};
}
static inline mb2_v mb2_add(mb2_v a, mb2_v b) {
    return (mb2_v){_mm256_add_epi64(a.lo, b.lo), _mm256_add_epi64(a.hi, b.hi)};
}
static inline mb2_v mb2_xor(mb2_v a, mb2_v b) {
    return (mb2_v){_mm256_xor_si256(a.lo, b.lo), _mm256_xor_si256(a.hi, b.hi)};
}
/* rotates by whole bytes are one shuffle instead of shift, shift, or */
#define MB2_ROT16_IDX _mm256_setr_epi8(6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13, \
                                       6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13)
#define MB2_ROT(x, b)                                                                                         \
    ((b) == 32   ? _mm256_shuffle_epi32((x), 0xB1)                                                            \
     : (b) == 16 ? _mm256_shuffle_epi8((x), MB2_ROT16_IDX)                                                    \
                 : _mm256_or_si256(_mm256_slli_epi64((x), (b)), _mm256_srli_epi64((x), 64 - (b))))
#define MB2_ROTL(a, b) ((mb2_v){MB2_ROT((a).lo, b), MB2_ROT((a).hi, b)})
static inline mb2_v mb2_has(mb2_v v) {  /* all ones in lanes with v != 0 */
    __m256i z = _mm256_setzero_si256(), ones = _mm256_set1_epi64x(-1);
    return (mb2_v){_mm256_xor_si256(_mm256_cmpeq_epi64(v.lo, z), ones), _mm256_xor_si256(_mm256_cmpeq_epi64(v.hi, z), ones)};
}
static inline mb2_v mb2_gather(mb2_v tail, mb2_v m, mb2_v ptr) {
    return (mb2_v){_mm256_mask_i64gather_epi64(tail.lo, (const long long *)0, ptr.lo, m.lo, 1),
                   _mm256_mask_i64gather_epi64(tail.hi, (const long long *)0, ptr.hi, m.hi, 1)};
}
static inline unsigned mb2_bits(mb2_v m) {
    return (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(m.lo)) |
           ((unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(m.hi)) << 4);
}

static inline int mb2_all8(mb2_v v) {
    __m256i seven = _mm256_set1_epi64x(7);  /* word counts are < 2^29: signed compare is fine */
    __m256i ge = _mm256_and_si256(_mm256_cmpgt_epi64(v.lo, seven), _mm256_cmpgt_epi64(v.hi, seven));
    return _mm256_movemask_pd(_mm256_castsi256_pd(ge)) == 0xf;
}
/* 32 bytes at p, or its first nbytes (0..31) bytes zero-padded without reading past them: whole
 * words by a masked load (masked-out words cannot fault), the partial word byte by byte */
static inline __m256i mb2_load32(const uint8_t *p, int part, uint32_t nbytes) {
    if (!part) return _mm256_loadu_si256((const __m256i *)p);
    const uint32_t words = nbytes >> 3, tail = nbytes & 7;
    const __m256i idx = _mm256_setr_epi64x(0, 1, 2, 3);
    __m256i v = _mm256_maskload_epi64((const long long *)p, _mm256_cmpgt_epi64(_mm256_set1_epi64x(words), idx));
    if (tail) {
        uint64_t b = 0;
        memcpy(&b, p + 8 * words, tail);  /* x86-64: little-endian */
        v = _mm256_blendv_epi8(v, _mm256_set1_epi64x((long long)b),
                               _mm256_cmpeq_epi64(_mm256_set1_epi64x(words), idx));
    }
    return v;
}
/* 4 x 4 transposes of 64-bit words for each half of the lanes, twice (words 0-3, 4-7); part: only
 * the first nbytes (< 64) bytes of each lane, zero-padded */
static inline void mb2_loadx(const uint64_t *pa, uint32_t off, int part, uint32_t nbytes, mb2_v m[8]) {
    for (int h = 0; h < 2; h++) {
        for (int k = 0; k < 2; k++) {
            __m256i r[4], t[4], w[4];
            uint32_t nk = nbytes > 32u * k ? nbytes - 32u * k : 0;
            if (part && nk == 0) {
                for (int j = 0; j < 4; j++) {
                    if (h == 0) m[4 * k + j].lo = _mm256_setzero_si256();
                    else m[4 * k + j].hi = _mm256_setzero_si256();
                }
                continue;
            }
            for (int l = 0; l < 4; l++)
                r[l] = mb2_load32((const uint8_t *)(uintptr_t)(pa[4 * h + l] + off + 32 * k), part && nk < 32, nk);
            t[0] = _mm256_unpacklo_epi64(r[0], r[1]);
            t[1] = _mm256_unpackhi_epi64(r[0], r[1]);
            t[2] = _mm256_unpacklo_epi64(r[2], r[3]);
            t[3] = _mm256_unpackhi_epi64(r[2], r[3]);
            w[0] = _mm256_permute2x128_si256(t[0], t[2], 0x20);
            w[1] = _mm256_permute2x128_si256(t[1], t[3], 0x20);
            w[2] = _mm256_permute2x128_si256(t[0], t[2], 0x31);
            w[3] = _mm256_permute2x128_si256(t[1], t[3], 0x31);
            for (int j = 0; j < 4; j++) {
                if (h == 0) m[4 * k + j].lo = w[j];
                else m[4 * k + j].hi = w[j];
            }
        }
    }
}

/* words 0-1 of the 16 bytes at pa[l] + off for every lane: per four lanes two 128-bit loads, two
 * inserts into the upper halves and two unpacks */
static inline __attribute__((always_inline)) void mb2_load2(const uint64_t *pa, uint32_t off, mb2_v m[2]) {
#define MB2_X(l) _mm_loadu_si128((const __m128i *)(uintptr_t)(pa[l] + off))
    __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(MB2_X(0)), MB2_X(2), 1);
    __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(MB2_X(1)), MB2_X(3), 1);
    __m256i c = _mm256_inserti128_si256(_mm256_castsi128_si256(MB2_X(4)), MB2_X(6), 1);
    __m256i d = _mm256_inserti128_si256(_mm256_castsi128_si256(MB2_X(5)), MB2_X(7), 1);
#undef MB2_X
    m[0] = (mb2_v){_mm256_unpacklo_epi64(a, b), _mm256_unpacklo_epi64(c, d)};
    m[1] = (mb2_v){_mm256_unpackhi_epi64(a, b), _mm256_unpackhi_epi64(c, d)};
}

/* word 0 of the 8 bytes at pa[l] + off for every lane: 8-byte loads, unpacks and inserts */
static inline __attribute__((always_inline)) mb2_v mb2_load1(const uint64_t *pa, uint32_t off) {
#define MB2_X(l) _mm_loadl_epi64((const __m128i *)(uintptr_t)(pa[l] + off))
    __m128i a = _mm_unpacklo_epi64(MB2_X(0), MB2_X(1)), b = _mm_unpacklo_epi64(MB2_X(2), MB2_X(3));
    __m128i c = _mm_unpacklo_epi64(MB2_X(4), MB2_X(5)), d = _mm_unpacklo_epi64(MB2_X(6), MB2_X(7));
#undef MB2_X
    return (mb2_v){_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1),
                   _mm256_inserti128_si256(_mm256_castsi128_si256(c), d, 1)};
}
static inline mb2_v mb2_shr(mb2_v v, uint32_t n) {
    __m128i k = _mm_cvtsi32_si128((int)n);
    return (mb2_v){_mm256_srl_epi64(v.lo, k), _mm256_srl_epi64(v.hi, k)};
}

#define MB_NAME lt_siphash_many_avx2
#define MB_V mb2_v
#define V_LOAD(p) mb2_load(p)
#define V_STORE(p, v) mb2_store((p), (v))
#define V_SPLAT(x) mb2_splat(x)
#define V_ADD(a, b) mb2_add((a), (b))
#define V_XOR(a, b) mb2_xor((a), (b))
#define V_ROTL(a, b) MB2_ROTL(a, b)
#define MB_MASK mb2_v
#define MB_HAS(v) mb2_has(v)
#define MB_GATHER(tail, m, ptr) mb2_gather((tail), (m), (ptr))
#define MB_DEC(v, m) mb2_add((v), (m)) /* m is all ones (-1) in the lanes to decrement */
#define MB_BITS(m) mb2_bits(m)
#define MB_ALL8(v) mb2_all8(v)
#define MB_LOAD8(pa, off, m) mb2_loadx((pa), (off), 0, 0, (m))
#define MB_LOAD2(pa, off, m) mb2_load2((pa), (off), (m))
#define MB_LOAD1(pa, off) mb2_load1((pa), (off))
#define MB_SHR(v, n) mb2_shr((v), (n))
#define MB_LOADPART(pa, off, nbytes, m) mb2_loadx((pa), (off), 1, (nbytes), (m))
#include "siphash_mb.h"

LT_TARGET_END
#endif
