/*
 * Multi-buffer keyed BLAKE3 ("many inputs"): MB_LANES frames of at most one chunk (1024 bytes) hashed
 * at once, one frame per 32-bit SIMD lane. Included by digest_blake3_avx2.c (8 lanes, ymm) and
 * digest_blake3_avx512.c (16 lanes, zmm), and on arm64 by digest_blake3_neon.c (4 lanes, NEON), with
 * these macros defined:
 *
 *   MB_NAME                 name of the function to define (an lt_digest_many_fn)
 *   MB_LANES                lanes per vector (4, 8 or 16)
 *   MB_V                    type of MB_LANES 32-bit lanes
 *   V_LOAD(p) / V_STORE(p, v)  lanes from / to uint32_t[MB_LANES] (any alignment)
 *   V_SPLAT(x), V_ADD(a, b), V_XOR(a, b)
 *   V_ROT16 / V_ROT12 / V_ROT8 / V_ROT7 (x)   rotate every lane right
 *   MB_LOAD_MSG(ptrs, m)    m[w] = word w (little-endian) of the 64-byte block at ptrs[l], lane l,
 *                           for w < 16: MB_LANES block loads and a transpose
 *   MB_STORE_CV(cv, rows)   rows[l][0..7] = cv[0..7] lane l (the un-transpose of the chaining values)
 *
 * Scheme (one step = one 64-byte block in every lane):
 *   - a frame of n bytes is max(1, ceil(n / 64)) blocks of chunk 0 with the key as the first
 *     chaining value: CHUNK_START on its first block; CHUNK_END and ROOT on its last, whose
 *     block_len is what is left (0..64) and whose bytes are zero-padded in a per-lane staging
 *     block when it is short. The root output's first 16 / 32 bytes are the chaining value the last
 *     compression leaves (the same as the single-message code, digest_blake3.c);
 *   - block_len and the flags are per-lane vectors, so lanes at different blocks of different
 *     frames share one compression;
 *   - a lane whose frame has ended is refilled at once with the next frame (chaining value back to
 *     the key), so lanes never wait for the longest frame of a group; idle lanes at the end of a
 *     batch hash a zero block whose result nobody reads;
 *   - frames longer than one chunk take the path's single-message code (c->fn) in order.
 * Block loads are little-endian (x86-64, arm64). tests/test_multibuffer.py checks mixed lengths on
 * every path against the scalar path and the blake3 package (native/tests/selftest.c on arm64).
 */
#ifndef MB_NAME
#error "define MB_NAME and the MB_* lane operations before including blake3_mb.h"
#endif

#define MB_CAT2(a, b) a##b
#define MB_CAT(a, b) MB_CAT2(a, b)
#define MB_FN(x) MB_CAT(MB_NAME, x)

enum { MB_CHUNK_START = 1, MB_CHUNK_END = 2, MB_ROOT = 8, MB_KEYED_HASH = 16 };

#define MB_G(a, b, c, d, x, y)                                                                      \
    do {                                                                                            \
        a = V_ADD(V_ADD(a, b), (x)); d = V_ROT16(V_XOR(d, a));                                      \
        c = V_ADD(c, d);             b = V_ROT12(V_XOR(b, c));                                      \
        a = V_ADD(V_ADD(a, b), (y)); d = V_ROT8(V_XOR(d, a));                                       \
        c = V_ADD(c, d);             b = V_ROT7(V_XOR(b, c));                                       \
    } while (0)

/* One round; the message words are permuted between rounds by renaming (MB_PERMUTE). */
#define MB_ROUND(m)                                                                                 \
    do {                                                                                            \
        MB_G(v0, v4, v8, v12, m[0], m[1]);                                                          \
        MB_G(v1, v5, v9, v13, m[2], m[3]);                                                          \
        MB_G(v2, v6, v10, v14, m[4], m[5]);                                                         \
        MB_G(v3, v7, v11, v15, m[6], m[7]);                                                         \
        MB_G(v0, v5, v10, v15, m[8], m[9]);                                                         \
        MB_G(v1, v6, v11, v12, m[10], m[11]);                                                       \
        MB_G(v2, v7, v8, v13, m[12], m[13]);                                                        \
        MB_G(v3, v4, v9, v14, m[14], m[15]);                                                        \
    } while (0)

#define MB_PERMUTE(m)                                                                               \
    do {                                                                                            \
        MB_V t_[16];                                                                                \
        static const uint8_t p_[16] = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};       \
        for (int i_ = 0; i_ < 16; i_++) t_[i_] = m[p_[i_]];                                         \
        for (int i_ = 0; i_ < 16; i_++) m[i_] = t_[i_];                                             \
    } while (0)

/* cv[0..7] <- compress(cv, m, counter 0, block_len, flags), first eight output words */
static inline __attribute__((always_inline)) void MB_FN(_compress)(MB_V cv[8], MB_V m[16], MB_V blen,
                                                                   MB_V flags) {
    MB_V v0 = cv[0], v1 = cv[1], v2 = cv[2], v3 = cv[3], v4 = cv[4], v5 = cv[5], v6 = cv[6], v7 = cv[7];
    MB_V v8 = V_SPLAT(0x6A09E667), v9 = V_SPLAT(0xBB67AE85), v10 = V_SPLAT(0x3C6EF372),
         v11 = V_SPLAT(0xA54FF53A);
    MB_V v12 = V_SPLAT(0), v13 = V_SPLAT(0), v14 = blen, v15 = flags;
    MB_ROUND(m); MB_PERMUTE(m);
    MB_ROUND(m); MB_PERMUTE(m);
    MB_ROUND(m); MB_PERMUTE(m);
    MB_ROUND(m); MB_PERMUTE(m);
    MB_ROUND(m); MB_PERMUTE(m);
    MB_ROUND(m); MB_PERMUTE(m);
    MB_ROUND(m);
    cv[0] = V_XOR(v0, v8); cv[1] = V_XOR(v1, v9); cv[2] = V_XOR(v2, v10); cv[3] = V_XOR(v3, v11);
    cv[4] = V_XOR(v4, v12); cv[5] = V_XOR(v5, v13); cv[6] = V_XOR(v6, v14); cv[7] = V_XOR(v7, v15);
}

static const uint8_t MB_FN(_zero)[64] __attribute__((aligned(64)));

static inline __attribute__((always_inline)) void MB_FN(_run)(const lt_dctx *c, const uint8_t *const *msgs,
                                                              const uint32_t *lens, size_t n, uint8_t *out,
                                                              size_t stride, const size_t OUT) {
    enum { L = MB_LANES };
    MB_V cv[8];
    for (int i = 0; i < 8; i++) cv[i] = V_SPLAT(c->u.b3.key[i]);
    uint8_t stage[L][64] __attribute__((aligned(64)));
    uint32_t rows[L][8] __attribute__((aligned(64)));
    const uint8_t *ptr[L], *bp[L];
    uint32_t left[L], blen[L], flags[L];
    uint8_t *dst[L];
    size_t next = 0;
    unsigned active = 0;

    /* next frame of at most one chunk into lane l (longer ones are hashed on the way); 0 if none */
    #define MB_TAKE(l)                                                                             \
        ({                                                                                         \
            int got_ = 0;                                                                          \
            while (next < n) {                                                                     \
                size_t i_ = next++;                                                                \
                if (lens[i_] > 1024) {                                                             \
                    c->fn(c, msgs[i_], lens[i_], out + i_ * stride);                               \
                    continue;                                                                      \
                }                                                                                  \
                ptr[l] = msgs[i_];                                                                 \
                left[l] = lens[i_];                                                                \
                flags[l] = MB_KEYED_HASH | MB_CHUNK_START;                                         \
                dst[l] = out + i_ * stride;                                                        \
                got_ = 1;                                                                          \
                break;                                                                             \
            }                                                                                      \
            got_;                                                                                  \
        })

    for (unsigned l = 0; l < L; l++) {
        if (MB_TAKE(l)) {
            active |= 1u << l;
        } else {
            ptr[l] = MB_FN(_zero);
            left[l] = 0;
            flags[l] = 0;
        }
    }
    while (active) {
        /* this step's block of every lane */
        unsigned ending = 0;
        for (unsigned l = 0; l < L; l++) {
            uint32_t lf = left[l];
            if (lf > 64) {
                bp[l] = ptr[l];
                blen[l] = 64;
                continue;
            }
            blen[l] = lf;
            if (!((active >> l) & 1)) {
                bp[l] = MB_FN(_zero);
                continue;
            }
            ending |= 1u << l;
            flags[l] |= MB_CHUNK_END | MB_ROOT;
            if (lf == 64) {
                bp[l] = ptr[l];
            } else {
                memset(stage[l], 0, 64);
                memcpy(stage[l], ptr[l], lf);
                bp[l] = stage[l];
            }
        }
        MB_V m[16];
        MB_LOAD_MSG(bp, m);
        MB_FN(_compress)(cv, m, V_LOAD(blen), V_LOAD(flags));
        for (unsigned l = 0; l < L; l++) {
            if (left[l] > 64) {  /* ending lanes are reset below, idle lanes stay as they are */
                ptr[l] += 64;
                left[l] -= 64;
                flags[l] = MB_KEYED_HASH;
            }
        }
        if (!ending) continue;
        /* once per frame: outputs of the lanes that ended, then refill them */
        MB_STORE_CV(cv, rows);
        unsigned refill = 0;
        do {
            unsigned l = (unsigned)__builtin_ctz(ending);
            ending &= ending - 1;
            memcpy(dst[l], rows[l], OUT);  /* little-endian hosts only (x86-64, arm64) */
            if (MB_TAKE(l)) {
                refill |= 1u << l;
            } else {
                active &= ~(1u << l);
                ptr[l] = MB_FN(_zero);
                left[l] = 0;
                flags[l] = 0;
            }
        } while (ending);
        if (refill) {
            /* chaining value back to the key in the refilled lanes, through memory (rare path) */
            uint32_t w[8][L] __attribute__((aligned(64)));
            for (int i = 0; i < 8; i++) V_STORE(w[i], cv[i]);
            for (unsigned r = refill; r; r &= r - 1) {
                unsigned l = (unsigned)__builtin_ctz(r);
                for (int i = 0; i < 8; i++) w[i][l] = c->u.b3.key[i];
            }
            for (int i = 0; i < 8; i++) cv[i] = V_LOAD(w[i]);
        }
    }
    #undef MB_TAKE
}

void MB_NAME(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n, uint8_t *out,
             size_t out_stride) {
    if (c->out_len == 16)
        MB_FN(_run)(c, msgs, lens, n, out, out_stride, 16);
    else
        MB_FN(_run)(c, msgs, lens, n, out, out_stride, 32);
}
