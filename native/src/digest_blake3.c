/*
 * BLAKE3 keyed_hash (O'Connor, Aumasson, Neves, Wilcox-O'Hearn, "BLAKE3: one function, fast
 * everywhere", 2020, sections 2.1-2.6), output truncated to 16 or 32 bytes (the first bytes of
 * the root output at output counter 0). Correct for any input length: 1024-byte chunks of 64-byte
 * blocks, chaining values merged into a left-complete binary tree, KEYED_HASH on every node.
 *
 * The single-message paths differ only in the compression function; their tree walk is shared.
 *   portable  plain C
 *   sse41     the 4x4 state as four row vectors, G on four columns / diagonals at once; rotations
 *             by 16 and 8 with byte shuffles
 *   avx512vl  the same with the AVX-512VL rotate instruction (vprord) for every rotation
 *   avx512-mb / avx2-mb  many inputs at once (blake3_mb.h): 16 / 8 chunks in 32-bit SIMD lanes, from
 *             one frame or several, then the parent nodes of each tree level in the lanes; batches
 *             (lt_dctx_run_many) and single messages of B3_MB_SINGLE_MIN bytes or more; shorter
 *             single messages and narrow tree levels on the avx512vl / sse41 code
 *   neon-mb   (arm64) the same scheme with 4 lanes in NEON registers (batches only); single messages
 *             and narrow tree levels on the portable code
 */
#include "ledgertool.h"
#include "lt_internal.h"

enum { CHUNK_START = 1, CHUNK_END = 2, PARENT = 4, ROOT = 8, KEYED_HASH = 16 };
#define CHUNK_LEN 1024
#define BLOCK_LEN 64

static const uint32_t IV[8] = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                               0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};

/* Message word order of each of the 7 rounds: the permutation 2,6,3,10,7,0,4,13,1,11,12,5,9,14,15,8
 * applied round times. */
static const uint8_t SCHEDULE[7][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8},
    {3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1},
    {10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6},
    {12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4},
    {9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7},
    {11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13},
};

/* compress(cv, block, counter, block_len, flags): the first 8 output words (all we need). */
typedef lt_b3_compress_fn compress_fn;

static inline uint32_t rotr32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

#define G(a, b, c, d, x, y)                                 \
    do {                                                    \
        v[a] = v[a] + v[b] + (x); v[d] = rotr32(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];       v[b] = rotr32(v[b] ^ v[c], 12); \
        v[a] = v[a] + v[b] + (y); v[d] = rotr32(v[d] ^ v[a], 8);  \
        v[c] = v[c] + v[d];       v[b] = rotr32(v[b] ^ v[c], 7);  \
    } while (0)

static void compress_portable(uint32_t cv[8], const uint8_t block[64], uint64_t counter, uint32_t block_len,
                              uint32_t flags) {
    uint32_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = lt_load_le32(block + 4 * i);
    for (int i = 0; i < 8; i++) v[i] = cv[i];
    v[8] = IV[0]; v[9] = IV[1]; v[10] = IV[2]; v[11] = IV[3];
    v[12] = (uint32_t)counter; v[13] = (uint32_t)(counter >> 32); v[14] = block_len; v[15] = flags;
    for (int r = 0; r < 7; r++) {
        const uint8_t *s = SCHEDULE[r];
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) cv[i] = v[i] ^ v[i + 8];
}

#if LT_X86_PATHS
#include <immintrin.h>

/* One compression on row vectors; ROT16/ROT12/ROT8/ROT7 are supplied per instruction set. */
#define COMPRESS_ROWS(ROT16, ROT12, ROT8, ROT7)                                                     \
    uint32_t m[16];                                                                                 \
    for (int i = 0; i < 16; i++) m[i] = lt_load_le32(block + 4 * i);                                \
    __m128i r0 = _mm_loadu_si128((const __m128i *)cv), r1 = _mm_loadu_si128((const __m128i *)(cv + 4)); \
    __m128i r2 = _mm_loadu_si128((const __m128i *)IV);                                              \
    __m128i r3 = _mm_set_epi32((int)flags, (int)block_len, (int)(uint32_t)(counter >> 32), (int)(uint32_t)counter); \
    _Pragma("GCC unroll 7") for (int r = 0; r < 7; r++) {                                         \
        const uint8_t *s = SCHEDULE[r];                                                             \
        __m128i mx = _mm_set_epi32((int)m[s[6]], (int)m[s[4]], (int)m[s[2]], (int)m[s[0]]);         \
        __m128i my = _mm_set_epi32((int)m[s[7]], (int)m[s[5]], (int)m[s[3]], (int)m[s[1]]);         \
        __m128i mz = _mm_set_epi32((int)m[s[14]], (int)m[s[12]], (int)m[s[10]], (int)m[s[8]]);      \
        __m128i mw = _mm_set_epi32((int)m[s[15]], (int)m[s[13]], (int)m[s[11]], (int)m[s[9]]);      \
        r0 = _mm_add_epi32(_mm_add_epi32(r0, r1), mx); r3 = ROT16(_mm_xor_si128(r3, r0));           \
        r2 = _mm_add_epi32(r2, r3); r1 = ROT12(_mm_xor_si128(r1, r2));                              \
        r0 = _mm_add_epi32(_mm_add_epi32(r0, r1), my); r3 = ROT8(_mm_xor_si128(r3, r0));            \
        r2 = _mm_add_epi32(r2, r3); r1 = ROT7(_mm_xor_si128(r1, r2));                               \
        r1 = _mm_shuffle_epi32(r1, 0x39); r2 = _mm_shuffle_epi32(r2, 0x4E); r3 = _mm_shuffle_epi32(r3, 0x93); \
        r0 = _mm_add_epi32(_mm_add_epi32(r0, r1), mz); r3 = ROT16(_mm_xor_si128(r3, r0));           \
        r2 = _mm_add_epi32(r2, r3); r1 = ROT12(_mm_xor_si128(r1, r2));                              \
        r0 = _mm_add_epi32(_mm_add_epi32(r0, r1), mw); r3 = ROT8(_mm_xor_si128(r3, r0));            \
        r2 = _mm_add_epi32(r2, r3); r1 = ROT7(_mm_xor_si128(r1, r2));                               \
        r1 = _mm_shuffle_epi32(r1, 0x93); r2 = _mm_shuffle_epi32(r2, 0x4E); r3 = _mm_shuffle_epi32(r3, 0x39); \
    }                                                                                               \
    _mm_storeu_si128((__m128i *)cv, _mm_xor_si128(r0, r2));                                         \
    _mm_storeu_si128((__m128i *)(cv + 4), _mm_xor_si128(r1, r3));

#define SSE_ROT16(x) _mm_shuffle_epi8((x), _mm_set_epi8(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2))
#define SSE_ROT8(x) _mm_shuffle_epi8((x), _mm_set_epi8(12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, 1))
#define SSE_ROT12(x) _mm_or_si128(_mm_srli_epi32((x), 12), _mm_slli_epi32((x), 20))
#define SSE_ROT7(x) _mm_or_si128(_mm_srli_epi32((x), 7), _mm_slli_epi32((x), 25))

__attribute__((target("sse4.1,ssse3")))
static void compress_sse41(uint32_t cv[8], const uint8_t block[64], uint64_t counter, uint32_t block_len,
                           uint32_t flags) {
    COMPRESS_ROWS(SSE_ROT16, SSE_ROT12, SSE_ROT8, SSE_ROT7)
}

#define VL_ROT16(x) _mm_ror_epi32((x), 16)
#define VL_ROT12(x) _mm_ror_epi32((x), 12)
#define VL_ROT8(x) _mm_ror_epi32((x), 8)
#define VL_ROT7(x) _mm_ror_epi32((x), 7)

__attribute__((target("avx512f,avx512vl,sse4.1,ssse3")))
static void compress_avx512vl(uint32_t cv[8], const uint8_t block[64], uint64_t counter, uint32_t block_len,
                              uint32_t flags) {
    COMPRESS_ROWS(VL_ROT16, VL_ROT12, VL_ROT8, VL_ROT7)
}
#endif

/* Chaining value of one whole chunk, or (root) of the last chunk when it is the whole input. */
static void chunk_cv(compress_fn compress, const uint32_t key[8], uint32_t mode, const uint8_t *in,
                     size_t len,
                     uint64_t chunk, uint32_t extra_flags, uint32_t cv[8]) {
    memcpy(cv, key, 32);
    size_t nblocks = len ? (len + BLOCK_LEN - 1) / BLOCK_LEN : 1;
    for (size_t b = 0; b < nblocks; b++) {
        uint32_t flags = mode | (b == 0 ? CHUNK_START : 0);
        size_t blen = BLOCK_LEN;
        const uint8_t *p = in + b * BLOCK_LEN;
        uint8_t last[BLOCK_LEN];
        if (b == nblocks - 1) {
            flags |= CHUNK_END | extra_flags;
            blen = len - b * BLOCK_LEN;
            if (blen < BLOCK_LEN) {
                memset(last, 0, sizeof last);
                if (blen) memcpy(last, p, blen);
                p = last;
            }
        }
        compress(cv, p, chunk, (uint32_t)blen, flags);
    }
}

static void parent_cv(compress_fn compress, const uint32_t key[8], uint32_t mode,
                      const uint32_t left[8], const uint32_t right[8],
                      uint32_t extra_flags, uint32_t cv[8]) {
    uint8_t block[64];
    for (int i = 0; i < 8; i++) {
        lt_store_le32(block + 4 * i, left[i]);
        lt_store_le32(block + 32 + 4 * i, right[i]);
    }
    memcpy(cv, key, 32);
    compress(cv, block, 0, BLOCK_LEN, mode | PARENT | extra_flags);
}

/* Whole chunks first, merged on a stack as the tree fills (a subtree is complete when the number
 * of chunks so far has a trailing zero bit); the last chunk stays open and is folded up the stack
 * at the end, the final node carrying ROOT. */
/* mode: KEYED_HASH for the keyed digests, 0 for the plain hash (key = IV) of leaf entries */
static void blake3_keyed(compress_fn compress, const uint32_t key[8], uint32_t mode,
                         const uint8_t *in, size_t len,
                         uint8_t *out, size_t out_len) {
    uint32_t stack[54][8], cv[8];
    int depth = 0;
    uint64_t chunk = 0;
    while (len > CHUNK_LEN) {
        chunk_cv(compress, key, mode, in, CHUNK_LEN, chunk, 0, cv);
        chunk++;
        for (uint64_t t = chunk; (t & 1) == 0; t >>= 1) {
            depth--;
            parent_cv(compress, key, mode, stack[depth], cv, 0, cv);
        }
        memcpy(stack[depth++], cv, 32);
        in += CHUNK_LEN;
        len -= CHUNK_LEN;
    }
    if (depth == 0) {
        chunk_cv(compress, key, mode, in, len, chunk, ROOT, cv);
    } else {
        chunk_cv(compress, key, mode, in, len, chunk, 0, cv);
        while (depth > 0) {
            depth--;
            parent_cv(compress, key, mode, stack[depth], cv, depth == 0 ? ROOT : 0, cv);
        }
    }
    uint8_t full[32];
    for (int i = 0; i < 8; i++) lt_store_le32(full + 4 * i, cv[i]);
    memcpy(out, full, out_len);
}

static void b3_init(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv) {
    for (int i = 0; i < 8; i++) c->u.b3.key[i] = lt_load_le32(key + 4 * i);
    c->u.b3.mode = KEYED_HASH;
}

static void b3_digest_portable(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    blake3_keyed(compress_portable, c->u.b3.key, c->u.b3.mode, msg, len, out, c->out_len);
}

#if LT_X86_PATHS
static void b3_digest_sse41(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    blake3_keyed(compress_sse41, c->u.b3.key, c->u.b3.mode, msg, len, out, c->out_len);
}
static void b3_digest_avx512vl(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    blake3_keyed(compress_avx512vl, c->u.b3.key, c->u.b3.mode, msg, len, out, c->out_len);
}
#endif

#if LT_X86_PATHS
static int has_avx512_mb(void) { return lt_cpu_has_avx512_mb() && lt_cpu_has_avx512vl(); }
static int has_avx2_mb(void) { return lt_cpu_has_avx2() && lt_cpu_has_sse41(); }

/* Multi-buffer paths: batches through the lanes; a single message too, once it has enough chunks to
 * fill a few lanes (below that the row code is as fast and has no lane set-up). */
#define B3_MB_SINGLE_MIN (3 * CHUNK_LEN)

static void b3_many_avx512(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                           uint8_t *out, size_t out_stride) {
    lt_blake3_many_avx512(c, compress_avx512vl, msgs, lens, n, out, out_stride);
}
static void b3_many_avx2(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                         uint8_t *out, size_t out_stride) {
    lt_blake3_many_avx2(c, compress_sse41, msgs, lens, n, out, out_stride);
}
static void b3_digest_avx512mb(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    if (len < B3_MB_SINGLE_MIN || len > UINT32_MAX) {
        b3_digest_avx512vl(c, msg, len, out);
        return;
    }
    uint32_t len32 = (uint32_t)len;
    lt_blake3_many_avx512(c, compress_avx512vl, &msg, &len32, 1, out, c->out_len);
}
static void b3_digest_avx2mb(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    if (len < B3_MB_SINGLE_MIN || len > UINT32_MAX) {
        b3_digest_sse41(c, msg, len, out);
        return;
    }
    uint32_t len32 = (uint32_t)len;
    lt_blake3_many_avx2(c, compress_sse41, &msg, &len32, 1, out, c->out_len);
}
#endif

#if LT_NEON_PATHS
static void b3_many_neon(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                         uint8_t *out, size_t out_stride) {
    lt_blake3_many_neon(c, compress_portable, msgs, lens, n, out, out_stride);
}
#endif

const lt_cpu_impl lt_blake3_impls[] = {
#if LT_X86_PATHS
    {"avx512-mb", has_avx512_mb, b3_init, b3_digest_avx512mb, b3_many_avx512},
    {"avx2-mb", has_avx2_mb, b3_init, b3_digest_avx2mb, b3_many_avx2},
    {"avx512vl", lt_cpu_has_avx512vl, b3_init, b3_digest_avx512vl, NULL},
    {"sse41", lt_cpu_has_sse41, b3_init, b3_digest_sse41, NULL},
#endif
#if LT_NEON_PATHS
    {"neon-mb", lt_cpu_has_neon, b3_init, b3_digest_portable, b3_many_neon},
#endif
    {"portable", NULL, b3_init, b3_digest_portable, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
