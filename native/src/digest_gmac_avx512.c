/*
 * AES-128-GMAC, multi-frame path "vpclmul-avx512-mb": GHASH with VPCLMULQDQ on zmm registers
 * (four 128-bit blocks per instruction) and AVX-512BW masked loads, four frames per group.
 *
 * With the ledger's fixed IV, AES_K(J0) is one constant per key (computed with AES-NI in init,
 * like the aesni-pclmul path), so a frame costs GHASH only and there is no per-frame AES to
 * vectorise. What this path does per frame:
 *   - no reduction inside a frame of up to 256 bytes: each data block is multiplied by the power of
 *     H it needs (block i of n gets H^(n+1-i), the length block H^1), from a table of H^33 .. H^1,
 *     four blocks per zmm. Longer frames first go through 512-byte chunks (H^32 .. H^1) and at most
 *     one 256-byte chunk, one reduction each, the running value folded into the next chunk's first
 *     block; the chunks use Karatsuba (three VPCLMULQDQ per four blocks instead of four: the
 *     carry-less multiplier is the bottleneck there), then the same tail;
 *   - the tail (1 .. 256 bytes) is read with masked byte loads: no staging copy, no read past the
 *     frame (masked-out bytes do not fault);
 *   - four frames (of any lengths) form a group: their unreduced products are summed lane-wise and
 *     transposed into one zmm (lane f = frame f), the four length blocks are multiplied in one
 *     VPCLMULQDQ, and one reduction, one XOR with AES_K(J0) and four 16-byte stores finish them.
 *     A batch that is not a multiple of four ends with a group padded by empty frames, and a single
 *     message (lt_dctx_run, lt_gmac_aes128) is such a group too: one code path for both entries.
 *
 * Field arithmetic: blocks are byte-reversed into 128-bit integers A (bit k = coefficient of
 * x^(127-k) in SP 800-38D's bit order), so a block is a = x^127 A(y) with y = 1/x. In y the modulus
 * x^128 + x^7 + x^2 + x + 1 becomes Q(y) = y^128 + y^127 + y^126 + y^121 + 1, and the carry-less
 * product C = A B gives a b = x^254 C(y). The table holds the powers of H times y (mod Q), so one
 * Montgomery-style division by y^128 (two 64-bit folds with y^63 + y^62 + y^57 = 0xC2 << 56, see
 * gf_reduce4) turns the product of a block and a table entry into the integer of the field product.
 * Everything is linear in GF(2), so products may be summed before one reduction.
 *
 * Constant time: no branch or table index depends on the key, H or the data; branches and the
 * table offset depend on frame lengths only, which are public.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_X86_PATHS
#include <immintrin.h>

LT_TARGET_BEGIN("avx512f,avx512bw,avx512vl,vpclmulqdq,pclmul,aes,sse4.1,ssse3")

/* c->u.gmac.hpow as 128-bit entries: [i] = H^(33-i) * y for i = 0 .. 32, [33 .. 35] zero (read by
 * the tail loads of frames whose last zmm is partly empty; the data lanes there are zero too). */
#define GP_ONE 32  /* index of H^1 */
#define GP_ENTRIES 36
_Static_assert(sizeof(((lt_dctx *)0)->u.gmac.hpow) >= GP_ENTRIES * 16, "hpow too small for the power table");

#define AI static inline __attribute__((always_inline))

AI __m512i xor3(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi64(a, b, c, 0x96); }

AI __m128i bswap1(__m128i x) {
    return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
AI __m512i bswap4(__m512i x) {  /* byte-reverse each 128-bit lane */
    return _mm512_shuffle_epi8(x, _mm512_broadcast_i32x4(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                                      13, 14, 15)));
}

#define GF_K 0xC200000000000000ull  /* y^63 + y^62 + y^57: Q(y) - y^128 - 1, divided by y^64 */

/* Reduce lo + mid * y^64 + hi * y^128 (the three parts of carry-less products) per 128-bit lane:
 * divide by y^128 modulo Q, 64 bits at a time. Folding away the low word m of a value v gives
 * (v >> 64) ^ (m << 64) ^ clmul(m, GF_K); done twice with the swaps merging the shifts, the middle
 * part joins in the first fold and the high part after the second. */
AI __m512i gf_reduce4(__m512i lo, __m512i mid, __m512i hi) {
    const __m512i k = _mm512_set1_epi64((long long)GF_K);
    __m512i x = xor3(_mm512_shuffle_epi32(lo, (_MM_PERM_ENUM)0x4e), _mm512_clmulepi64_epi128(lo, k, 0x00), mid);
    return xor3(_mm512_shuffle_epi32(x, (_MM_PERM_ENUM)0x4e), _mm512_clmulepi64_epi128(x, k, 0x00), hi);
}
AI __m128i gf_reduce1(__m128i lo, __m128i mid, __m128i hi) {
    const __m128i k = _mm_set_epi64x(0, (long long)GF_K);
    __m128i x = _mm_ternarylogic_epi64(_mm_shuffle_epi32(lo, 0x4e), _mm_clmulepi64_si128(lo, k, 0x00), mid, 0x96);
    return _mm_ternarylogic_epi64(_mm_shuffle_epi32(x, 0x4e), _mm_clmulepi64_si128(x, k, 0x00), hi, 0x96);
}

AI __m128i gf_mul1(__m128i a, __m128i b) {  /* a * b * y^-128: with b a table entry, the field product */
    __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
    return gf_reduce1(_mm_clmulepi64_si128(a, b, 0x00), mid, _mm_clmulepi64_si128(a, b, 0x11));
}

typedef struct { __m512i lo, mid, hi; } acc3;

AI void mul_acc(acc3 *a, __m512i x, __m512i h) {  /* schoolbook: four 64x64 products per lane */
    a->lo = _mm512_xor_si512(a->lo, _mm512_clmulepi64_epi128(x, h, 0x00));
    a->hi = _mm512_xor_si512(a->hi, _mm512_clmulepi64_epi128(x, h, 0x11));
    a->mid = xor3(a->mid, _mm512_clmulepi64_epi128(x, h, 0x01), _mm512_clmulepi64_epi128(x, h, 0x10));
}

AI __m128i fold4(__m512i z) {  /* XOR of the four 128-bit lanes */
    __m256i y = _mm256_xor_si256(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
    return _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

/* Lane f of the result = XOR of the four lanes of z[f]. */
AI __m512i hsum4x4(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    __m512i u01 = _mm512_xor_si512(_mm512_shuffle_i64x2(z0, z1, 0x44), _mm512_shuffle_i64x2(z0, z1, 0xEE));
    __m512i u23 = _mm512_xor_si512(_mm512_shuffle_i64x2(z2, z3, 0x44), _mm512_shuffle_i64x2(z2, z3, 0xEE));
    return _mm512_xor_si512(_mm512_shuffle_i64x2(u01, u23, 0x88), _mm512_shuffle_i64x2(u01, u23, 0xDD));
}

AI __mmask64 bytes_mask(size_t r) { return r >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << r) - 1); }

/* Karatsuba: lo = a0 h0, hi = a1 h1, and m = (a0 ^ a1)(h0 ^ h1) in place of the two cross products;
 * the middle part is m ^ lo ^ hi, taken once per sum. hk holds h0 ^ h1 in its low words. */
AI void kmul_acc(acc3 *a, __m512i x, __m512i h, __m512i hk) {
    __m512i xk = _mm512_xor_si512(x, _mm512_shuffle_epi32(x, (_MM_PERM_ENUM)0x4e));
    a->lo = _mm512_xor_si512(a->lo, _mm512_clmulepi64_epi128(x, h, 0x00));
    a->hi = _mm512_xor_si512(a->hi, _mm512_clmulepi64_epi128(x, h, 0x11));
    a->mid = _mm512_xor_si512(a->mid, _mm512_clmulepi64_epi128(xk, hk, 0x00));
}
AI __m512i kar_sum(__m512i h) { return _mm512_xor_si512(h, _mm512_shuffle_epi32(h, (_MM_PERM_ENUM)0x4e)); }

AI void chunk_mul(acc3 *b, const uint8_t *p, __m512i first, const __m512i h[4], const __m512i hk[4]) {
    kmul_acc(b, _mm512_xor_si512(first, bswap4(_mm512_loadu_si512(p))), h[0], hk[0]);
    kmul_acc(b, bswap4(_mm512_loadu_si512(p + 64)), h[1], hk[1]);
    kmul_acc(b, bswap4(_mm512_loadu_si512(p + 128)), h[2], hk[2]);
    kmul_acc(b, bswap4(_mm512_loadu_si512(p + 192)), h[3], hk[3]);
}

/* The unreduced GHASH products of a frame's data blocks (the length block excepted), spread over
 * the four lanes. Frames over 256 bytes: 512-byte then 256-byte chunks, one reduction each (the
 * reduction is on the critical path, so the longer chunk halves it per byte), then the tail. */
AI acc3 frame_blocks(const __m128i *tbl, const uint8_t *p, size_t t) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i acc = zero;  /* reduced value of the chunks so far, in lane 0 */
    acc3 a = {zero, zero, zero};
    if (__builtin_expect(t > 256, 0)) {
        __m512i h[8], hk[8];  /* H^32 .. H^1 */
        for (int i = 0; i < 8; i++) {
            h[i] = _mm512_loadu_si512(tbl + GP_ONE - 31 + 4 * i);
            hk[i] = kar_sum(h[i]);
        }
        while (t > 512) {
            acc3 b = {zero, zero, zero};
            chunk_mul(&b, p, acc, h, hk);
            chunk_mul(&b, p + 256, zero, h + 4, hk + 4);
            b.mid = xor3(b.mid, b.lo, b.hi);
            acc = _mm512_zextsi128_si512(gf_reduce1(fold4(b.lo), fold4(b.mid), fold4(b.hi)));
            p += 512;
            t -= 512;
        }
        if (t > 256) {
            acc3 b = {zero, zero, zero};
            chunk_mul(&b, p, acc, h + 4, hk + 4);
            b.mid = xor3(b.mid, b.lo, b.hi);
            acc = _mm512_zextsi128_si512(gf_reduce1(fold4(b.lo), fold4(b.mid), fold4(b.hi)));
            p += 256;
            t -= 256;
        }
    }
    if (t == 0) return a;
    /* t = 1 .. 256 bytes in rb blocks: block j gets H^(rb+1-j) = tbl[GP_ONE - rb + j] */
    const __m128i *base = tbl + GP_ONE - (t + 15) / 16;
    mul_acc(&a, _mm512_xor_si512(acc, bswap4(_mm512_maskz_loadu_epi8(bytes_mask(t), p))), _mm512_loadu_si512(base));
    if (t > 64) mul_acc(&a, bswap4(_mm512_maskz_loadu_epi8(bytes_mask(t - 64), p + 64)), _mm512_loadu_si512(base + 4));
    if (t > 128) mul_acc(&a, bswap4(_mm512_maskz_loadu_epi8(bytes_mask(t - 128), p + 128)), _mm512_loadu_si512(base + 8));
    if (t > 192) mul_acc(&a, bswap4(_mm512_maskz_loadu_epi8(bytes_mask(t - 192), p + 192)), _mm512_loadu_si512(base + 12));
    return a;
}

/* Tags of four frames (dst[f] gets 16 bytes). */
AI void gmac_group4(const lt_dctx *c, const uint8_t *const p[4], const size_t len[4], uint8_t *const dst[4]) {
    const __m128i *tbl = (const __m128i *)c->u.gmac.hpow;
    acc3 f0 = frame_blocks(tbl, p[0], len[0]), f1 = frame_blocks(tbl, p[1], len[1]);
    acc3 f2 = frame_blocks(tbl, p[2], len[2]), f3 = frame_blocks(tbl, p[3], len[3]);
    __m512i lo = hsum4x4(f0.lo, f1.lo, f2.lo, f3.lo);
    __m512i mid = hsum4x4(f0.mid, f1.mid, f2.mid, f3.mid);
    __m512i hi = hsum4x4(f0.hi, f1.hi, f2.hi, f3.hi);
    /* length blocks [8 len]_64 || [0]_64, byte-reversed: the bit count is the high word of a lane, so
     * only the products with its high word are non-zero */
    __m512i lb = _mm512_set_epi64((long long)(len[3] * 8), 0, (long long)(len[2] * 8), 0,
                                  (long long)(len[1] * 8), 0, (long long)(len[0] * 8), 0);
    __m512i h1 = _mm512_broadcast_i32x4(tbl[GP_ONE]);
    mid = _mm512_xor_si512(mid, _mm512_clmulepi64_epi128(lb, h1, 0x01));
    hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(lb, h1, 0x11));
    __m512i s = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)c->u.gmac.ek_j0));
    __m512i tag = _mm512_xor_si512(bswap4(gf_reduce4(lo, mid, hi)), s);
    _mm_storeu_si128((__m128i *)dst[0], _mm512_castsi512_si128(tag));
    _mm_storeu_si128((__m128i *)dst[1], _mm512_extracti32x4_epi32(tag, 1));
    _mm_storeu_si128((__m128i *)dst[2], _mm512_extracti32x4_epi32(tag, 2));
    _mm_storeu_si128((__m128i *)dst[3], _mm512_extracti32x4_epi32(tag, 3));
}

/* The key setup after aesni-pclmul's (digest_gmac.c: round keys, H, AES_K(J0)): hpow becomes the
 * table of H^k y from c->u.gmac.h. */
void lt_gmac_powers_vpclmul512(lt_dctx *c) {
    __m128i h = bswap1(_mm_loadu_si128((const __m128i *)c->u.gmac.h));
    /* H * y: shift the 128-bit integer left by one; a carry out of bit 127 (y^128) is replaced by
     * y^127 + y^126 + y^121 + 1, selected by a mask rather than a branch */
    __m128i carry = _mm_srli_epi64(h, 63);
    __m128i top = _mm_sub_epi64(_mm_setzero_si128(), _mm_shuffle_epi32(carry, 0xEE));
    __m128i hy = _mm_or_si128(_mm_slli_epi64(h, 1), _mm_slli_si128(carry, 8));
    hy = _mm_xor_si128(hy, _mm_and_si128(top, _mm_set_epi64x((long long)GF_K, 1)));
    __m128i *tbl = (__m128i *)c->u.gmac.hpow;
    __m128i pw = hy;
    tbl[GP_ONE] = hy;
    for (int i = GP_ONE - 1; i >= 0; i--) {
        pw = gf_mul1(pw, hy);  /* (H^k y)(H y) y^-128 = H^(k+1) y */
        tbl[i] = pw;
    }
    for (int i = GP_ONE + 1; i < GP_ENTRIES; i++) tbl[i] = _mm_setzero_si128();
}

void lt_gmac_digest_vpclmul512(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    static const uint8_t none[1];
    uint8_t scratch[3][16];
    const uint8_t *p[4] = {msg, none, none, none};
    const size_t l[4] = {len, 0, 0, 0};
    uint8_t *const d[4] = {out, scratch[0], scratch[1], scratch[2]};
    gmac_group4(c, p, l, d);
    explicit_bzero(scratch, sizeof scratch);  /* the tag of an empty frame is AES_K(J0) itself */
}

void lt_gmac_many_vpclmul512(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                             uint8_t *out, size_t out_stride) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint8_t *const p[4] = {msgs[i], msgs[i + 1], msgs[i + 2], msgs[i + 3]};
        const size_t l[4] = {lens[i], lens[i + 1], lens[i + 2], lens[i + 3]};
        uint8_t *const d[4] = {out + i * out_stride, out + (i + 1) * out_stride, out + (i + 2) * out_stride,
                               out + (i + 3) * out_stride};
        gmac_group4(c, p, l, d);
    }
    if (i < n) {  /* the last one to three frames, padded with empty frames whose tags are dropped */
        static const uint8_t none[1];
        uint8_t scratch[4][16];
        const uint8_t *p[4];
        size_t l[4];
        uint8_t *d[4];
        for (size_t f = 0; f < 4; f++, i++) {
            p[f] = i < n ? msgs[i] : none;
            l[f] = i < n ? lens[i] : 0;
            d[f] = i < n ? out + i * out_stride : scratch[f];
        }
        gmac_group4(c, p, l, d);
        explicit_bzero(scratch, sizeof scratch);
    }
}

LT_TARGET_END
#endif
