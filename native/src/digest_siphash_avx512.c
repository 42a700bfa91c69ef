/*
 * Multi-buffer SipHash on AVX-512F/VL: sixteen messages as two independent groups of eight 64-bit
 * lanes (two zmm registers per state word), interleaved instruction by instruction so one group's
 * SipRound latency hides behind the other's; rotates are vprolq, lane masks live in k registers,
 * whole words are fetched with one masked gather per group and step, or, in lockstep groups, by
 * contiguous (masked) loads and transposes. The lane scheme is in siphash_mb.h.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_X86_PATHS
#include <immintrin.h>

LT_TARGET_BEGIN("avx512f,avx512vl,avx2")

/* 8 x 8 transpose of 64-bit words (r[l] = the 8 words of lane l -> m[w] = word w of every lane):
 * unpack pairs, then two rounds of 128-bit chunk shuffles */
static inline void mb512_transpose(const __m512i r[8], __m512i m[8]) {
    __m512i t[8], u[8];
    for (int l = 0; l < 8; l += 2) {
        t[l] = _mm512_unpacklo_epi64(r[l], r[l + 1]);      /* words 0,2,4,6 of lanes l, l+1 */
        t[l + 1] = _mm512_unpackhi_epi64(r[l], r[l + 1]);  /* words 1,3,5,7 */
    }
    for (int o = 0; o < 2; o++) {  /* o = 0: even words, 1: odd words */
        u[o * 4 + 0] = _mm512_shuffle_i64x2(t[0 + o], t[2 + o], 0x88);  /* w0|w4 of lanes 0-3 */
        u[o * 4 + 1] = _mm512_shuffle_i64x2(t[0 + o], t[2 + o], 0xDD);  /* w2|w6 */
        u[o * 4 + 2] = _mm512_shuffle_i64x2(t[4 + o], t[6 + o], 0x88);  /* lanes 4-7 */
        u[o * 4 + 3] = _mm512_shuffle_i64x2(t[4 + o], t[6 + o], 0xDD);
        m[0 + o] = _mm512_shuffle_i64x2(u[o * 4 + 0], u[o * 4 + 2], 0x88);
        m[4 + o] = _mm512_shuffle_i64x2(u[o * 4 + 0], u[o * 4 + 2], 0xDD);
        m[2 + o] = _mm512_shuffle_i64x2(u[o * 4 + 1], u[o * 4 + 3], 0x88);
        m[6 + o] = _mm512_shuffle_i64x2(u[o * 4 + 1], u[o * 4 + 3], 0xDD);
    }
}
static inline void mb512_load8(const uint64_t *pa, uint32_t off, __m512i m[8]) {
    __m512i r[8];
    for (int l = 0; l < 8; l++) r[l] = _mm512_loadu_si512((const void *)(uintptr_t)(pa[l] + off));
    mb512_transpose(r, m);
}
/* The first nbytes (0..63) bytes at pa[l] + off of each lane, zero-padded, reading no byte past
 * them: whole words by masked loads (masked-out words cannot fault), the partial word by one gather
 * of the 8 bytes that end at the last byte (inside the frame when it is 8 bytes or longer), shifted
 * down; frames under 8 bytes byte by byte. */
static inline __attribute__((always_inline)) void mb512_loadpart(const uint64_t *pa, uint32_t off, uint32_t nbytes,
                                                                 __m512i m[8]) {
    __m512i r[8];
    const uint32_t words = nbytes >> 3, tail = nbytes & 7;
    const __mmask8 k = (__mmask8)((1u << words) - 1);
    for (int l = 0; l < 8; l++) r[l] = _mm512_maskz_loadu_epi64(k, (const void *)(uintptr_t)(pa[l] + off));
    mb512_transpose(r, m);
    if (!tail) return;
    if (off + nbytes >= 8) {
        __m512i g = _mm512_i64gather_epi64(_mm512_add_epi64(_mm512_loadu_si512((const void *)pa),
                                                            _mm512_set1_epi64((long long)(off + nbytes - 8))),
                                           (const void *)0, 1);
        m[words] = _mm512_srli_epi64(g, 64 - 8 * tail);
    } else {
        uint64_t t[8];
        for (int l = 0; l < 8; l++) {
            t[l] = 0;
            memcpy(&t[l], (const void *)(uintptr_t)pa[l], tail);  /* x86-64: little-endian */
        }
        m[0] = _mm512_loadu_si512((const void *)t);
    }
}

typedef struct { __m512i a, b; } mb16_v;  /* lanes 0-7, 8-15 */

static inline mb16_v mb16_load(const uint64_t *p) {
    return (mb16_v){_mm512_loadu_si512((const void *)p), _mm512_loadu_si512((const void *)(p + 8))};
}
static inline void mb16_store(uint64_t *p, mb16_v v) {
    _mm512_storeu_si512((void *)p, v.a);
    _mm512_storeu_si512((void *)(p + 8), v.b);
}
static inline mb16_v mb16_splat(uint64_t x) {
    __m512i s = _mm512_set1_epi64((long long)x);
    return (mb16_v){s, s};
}
#define MB16_2(op, x, y) ((mb16_v){op((x).a, (y).a), op((x).b, (y).b)})
#define MB16_ROTL(x, r) ((mb16_v){_mm512_rol_epi64((x).a, (r)), _mm512_rol_epi64((x).b, (r))})
static inline __mmask16 mb16_has(mb16_v v) {
    return (__mmask16)(_mm512_test_epi64_mask(v.a, v.a) | ((unsigned)_mm512_test_epi64_mask(v.b, v.b) << 8));
}
static inline mb16_v mb16_gather(mb16_v tail, __mmask16 m, mb16_v ptr) {
    return (mb16_v){_mm512_mask_i64gather_epi64(tail.a, (__mmask8)m, ptr.a, (const void *)0, 1),
                    _mm512_mask_i64gather_epi64(tail.b, (__mmask8)(m >> 8), ptr.b, (const void *)0, 1)};
}
static inline mb16_v mb16_dec(mb16_v v, __mmask16 m) {
    __m512i one = _mm512_set1_epi64(1);
    return (mb16_v){_mm512_mask_sub_epi64(v.a, (__mmask8)m, v.a, one),
                    _mm512_mask_sub_epi64(v.b, (__mmask8)(m >> 8), v.b, one)};
}
static inline int mb16_all8(mb16_v v) {
    __m512i eight = _mm512_set1_epi64(8);
    return (_mm512_cmpge_epu64_mask(v.a, eight) & _mm512_cmpge_epu64_mask(v.b, eight)) == 0xff;
}
static inline __attribute__((always_inline)) void mb16_load8(const uint64_t *pa, uint32_t off, mb16_v m[8]) {
    __m512i x[8], y[8];
    mb512_load8(pa, off, x);
    mb512_load8(pa + 8, off, y);
    for (int w = 0; w < 8; w++) m[w] = (mb16_v){x[w], y[w]};
}
static inline __attribute__((always_inline)) void mb16_loadpart(const uint64_t *pa, uint32_t off, uint32_t nbytes, mb16_v m[8]) {
    __m512i x[8], y[8];
    mb512_loadpart(pa, off, nbytes, x);
    mb512_loadpart(pa + 8, off, nbytes, y);
    for (int w = 0; w < 8; w++) m[w] = (mb16_v){x[w], y[w]};
}

#define MB_NAME lt_siphash_many_avx512
#define MB_LANES 16
#define MB_V mb16_v
#define V_LOAD(p) mb16_load(p)
#define V_STORE(p, v) mb16_store((p), (v))
#define V_SPLAT(x) mb16_splat(x)
#define V_ADD(x, y) MB16_2(_mm512_add_epi64, x, y)
#define V_XOR(x, y) MB16_2(_mm512_xor_si512, x, y)
#define V_ROTL(x, r) MB16_ROTL(x, r)
#define MB_MASK __mmask16
#define MB_HAS(v) mb16_has(v)
#define MB_GATHER(tail, m, ptr) mb16_gather((tail), (m), (ptr))
#define MB_DEC(v, m) mb16_dec((v), (m))
#define MB_BITS(m) ((unsigned)(m))
#define MB_ALL8(v) mb16_all8(v)
#define MB_LOAD8(pa, off, m) mb16_load8((pa), (off), (m))
#define MB_LOADPART(pa, off, nbytes, m) mb16_loadpart((pa), (off), (nbytes), (m))
#include "siphash_mb.h"

LT_TARGET_END
#endif
