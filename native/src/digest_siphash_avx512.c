/*
 * Multi-buffer SipHash on AVX-512F/VL: eight messages in the eight 64-bit lanes of one zmm
 * register; rotates are vprolq, lane masks live in k registers, whole words are fetched with one
 * masked gather per step. The lane scheme is in siphash_mb.h.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_X86_PATHS
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2")

/* 8 x 8 transpose of 64-bit words: unpack pairs, then two rounds of 128-bit chunk shuffles */
static inline void mb512_load8(const uint64_t *pa, __m512i m[8]) {
    __m512i r[8], t[8], u[8];
    for (int l = 0; l < 8; l++) r[l] = _mm512_loadu_si512((const void *)(uintptr_t)pa[l]);
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

#define MB_NAME lt_siphash_many_avx512
#define MB_V __m512i
#define V_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define V_STORE(p, v) _mm512_storeu_si512((void *)(p), (v))
#define V_SPLAT(x) _mm512_set1_epi64((long long)(x))
#define V_ADD(a, b) _mm512_add_epi64((a), (b))
#define V_XOR(a, b) _mm512_xor_si512((a), (b))
#define V_ROTL(a, b) _mm512_rol_epi64((a), (b))
#define MB_MASK __mmask8
#define MB_HAS(v) _mm512_test_epi64_mask((v), (v))
#define MB_GATHER(tail, m, ptr) _mm512_mask_i64gather_epi64((tail), (m), (ptr), (const void *)0, 1)
#define MB_DEC(v, m) _mm512_mask_sub_epi64((v), (m), (v), _mm512_set1_epi64(1))
#define MB_BITS(m) ((unsigned)(m))
#define MB_ALL8(v) (_mm512_cmpge_epu64_mask((v), _mm512_set1_epi64(8)) == 0xff)
#define MB_LOAD8(pa, m) mb512_load8((pa), (m))
#include "siphash_mb.h"

#pragma GCC pop_options
#endif
