/*
 * Multi-buffer keyed BLAKE3 (BLAKE3 paper, section 5.3 "many inputs"): MB_LANES chunks or parent
 * nodes compressed at once, one per 32-bit SIMD lane. Included by digest_blake3_avx2.c (8 lanes, ymm)
 * and digest_blake3_avx512.c (16 lanes, zmm), and on arm64 by digest_blake3_neon.c (4 lanes, NEON),
 * with these macros defined:
 *
 *   MB_NAME                 name of the function to define (see lt_internal.h)
 *   MB_LANES                lanes per vector (4, 8 or 16)
 *   MB_V                    type of MB_LANES 32-bit lanes
 *   V_LOAD(p) / V_STORE(p, v)  lanes from / to uint32_t[MB_LANES] (any alignment)
 *   V_SPLAT(x), V_ADD(a, b), V_XOR(a, b)
 *   V_ROT16 / V_ROT12 / V_ROT8 / V_ROT7 (x)   rotate every lane right
 *   MB_LOAD_MSG(ptrs, m)    m[w] = word w (little-endian) of the 64-byte block at ptrs[l], lane l,
 *                           for w < 16: MB_LANES block loads and a transpose
 *   MB_STORE_CV(cv, rows)   rows[l][0..7] = cv[0..7] lane l (the un-transpose of the chaining values)
 *
 * A batch is hashed in windows of at most MB_SLOTS chunks:
 *   - chunk pass: every frame is cut into 1024-byte chunks (the last one 0..1024 bytes) and the
 *     chunks of all frames of the window stream through the lanes, one 64-byte block per lane per
 *     step, with per-lane chunk counter, block_len and flags (CHUNK_START on a chunk's first block,
 *     CHUNK_END on its last, zero-padded in a per-lane staging block when short). A lane whose chunk
 *     has ended stores its chaining value and is refilled at once, so lanes never wait for the
 *     longest frame. A frame of at most one chunk is its own root (ROOT on its last block) and its
 *     output goes straight to `out`; the chunk chaining values of longer frames go to window slots;
 *   - tree pass: the parent nodes of one tree level of every frame of the window are compressed
 *     together in the lanes (one block each: left || right chaining value, read in place from the
 *     slots), an odd last node moving up a level unmerged: this pairing gives BLAKE3's
 *     left-complete tree. The one compression that leaves a single node carries ROOT and writes the
 *     output. Levels with fewer than MB_PMIN nodes use the path's single-message compression.
 *   - a frame of more than MB_SLOTS chunks is hashed on its own (MB_FN(_large)): whole subtrees of
 *     MB_SLOTS chunks (aligned, so complete) through the two passes, kept on a stack and merged as
 *     the tree fills, the rest of the frame the same way, then the stack folded into the root.
 * The root output's first 16 / 32 bytes are the chaining value the root compression leaves (as in
 * the single-message code, digest_blake3.c). Block loads are little-endian (x86-64, arm64).
 * tests/test_multibuffer.py and tests/test_digests.py check every path against the blake3 package
 * at every block, chunk and subtree edge.
 */
#ifndef MB_NAME
#error "define MB_NAME and the MB_* lane operations before including blake3_mb.h"
#endif

#define MB_CAT2(a, b) a##b
#define MB_CAT(a, b) MB_CAT2(a, b)
#define MB_FN(x) MB_CAT(MB_NAME, x)

enum { MB_CHUNK_START = 1, MB_CHUNK_END = 2, MB_PARENT = 4, MB_ROOT = 8 };
/* the context's mode flag: KEYED_HASH (16) for the keyed digests, 0 for the plain hash of leaf
 * entries (merkle.c) */
#define MB_MODE(c) ((c)->u.b3.mode)
/* chunk chaining values per window (a power of two: also the subtree size of a long frame); the
 * tests' stress build (LT_B3_SLOTS=4, LT_B3_PMIN=1 or 99) shrinks them to reach every branch */
#ifdef LT_B3_SLOTS
#define MB_SLOTS LT_B3_SLOTS
#else
#define MB_SLOTS 512
#endif
#define MB_LONG 16
/* a tree level with fewer parent nodes than this takes the single-message compression (>= 1) */
#ifdef LT_B3_PMIN
#define MB_PMIN LT_B3_PMIN
#else
#define MB_PMIN 4
#endif

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

/* cv[0..7] <- compress(cv, m, counter, block_len, flags), first eight output words, per lane */
static inline __attribute__((always_inline)) void MB_FN(_compress)(MB_V cv[8], MB_V m[16], MB_V ctr_lo,
                                                                   MB_V ctr_hi, MB_V blen, MB_V flags) {
    MB_V v0 = cv[0], v1 = cv[1], v2 = cv[2], v3 = cv[3], v4 = cv[4], v5 = cv[5], v6 = cv[6], v7 = cv[7];
    MB_V v8 = V_SPLAT(0x6A09E667), v9 = V_SPLAT(0xBB67AE85), v10 = V_SPLAT(0x3C6EF372),
         v11 = V_SPLAT(0xA54FF53A);
    MB_V v12 = ctr_lo, v13 = ctr_hi, v14 = blen, v15 = flags;
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

/* A frame of 2..MB_SLOTS chunks (a piece of a long frame: 1..MB_SLOTS) in the window; its chunk
 * chaining values are slots[slot .. slot + n), and each tree level is written over the one below. */
typedef struct {
    uint32_t slot, n;
    uint8_t *dst;  /* root output; NULL for a subtree of a long frame (result left in slots[slot]) */
} MB_FN(_frame);

typedef struct {
    const lt_dctx *c;
    lt_b3_compress_fn one;  /* the path's single-message compression */
    unsigned used, nframes, nlong;
    MB_FN(_frame) frames[MB_SLOTS / 2 + 1];
    size_t longs[MB_LONG];  /* frames of more than MB_SLOTS chunks met in this window */
    uint8_t slots[MB_SLOTS][32] __attribute__((aligned(64)));
} MB_FN(_window);

/*
 * Chunk pass over frames msgs[*next ..] until they run out or the window is full (*next is left at
 * the first frame not taken). `piece`: the caller hashes one piece of a long frame, whose chunks are
 * numbered from `base` and always go to the slots (never ROOT, even a single chunk).
 */
static inline __attribute__((always_inline)) void MB_FN(_chunks)(MB_FN(_window) *w, const uint8_t *const *msgs,
                                                                 const uint32_t *lens, size_t n, size_t *next_io,
                                                                 uint8_t *out, size_t stride, const size_t OUT,
                                                                 uint32_t base, const int piece) {
    enum { L = MB_LANES };
    const lt_dctx *c = w->c;
    MB_V cv[8];
    for (int i = 0; i < 8; i++) cv[i] = V_SPLAT(c->u.b3.key[i]);
    uint8_t stage[L][64] __attribute__((aligned(64)));
    uint32_t rows[L][8] __attribute__((aligned(64)));
    /* chunk counters: frames are at most UINT32_MAX bytes, so the counter's high word is 0 */
    uint32_t ctr[L] __attribute__((aligned(64)));
    const uint8_t *ptr[L], *bp[L];
    uint32_t left[L], blen[L] __attribute__((aligned(64))), flags[L] __attribute__((aligned(64)));
    uint8_t *dst[L];
    unsigned rootm = 0;  /* lanes whose chunk is a whole frame (ROOT on its last block) */
    size_t next = *next_io;
    /* the multi-chunk frame being cut: next chunk at cp, crem bytes left, its counter and slot */
    const uint8_t *cp = NULL;
    size_t crem = 0;
    uint32_t cctr = 0;
    uint8_t *cslot = NULL;
    size_t stop = n;  /* lowered to `next` when the window is full */
    unsigned active = 0;

    /* next chunk into lane l; 0 if none (frames done, or the window is full) */
    #define MB_TAKE(l)                                                                             \
        ({                                                                                         \
            int got_ = 0;                                                                          \
            for (;;) {                                                                             \
                if (crem) {                                                                        \
                    uint32_t cl_ = crem > 1024 ? 1024 : (uint32_t)crem;                            \
                    ptr[l] = cp; left[l] = cl_; ctr[l] = cctr;                                     \
                    flags[l] = MB_MODE(c) | MB_CHUNK_START; rootm &= ~(1u << (l));              \
                    dst[l] = cslot;                                                                \
                    cp += cl_; crem -= cl_; cctr++; cslot += 32;                                   \
                    got_ = 1;                                                                      \
                    break;                                                                         \
                }                                                                                  \
                if (next >= stop) break;                                                           \
                size_t i_ = next;                                                                  \
                uint32_t len_ = lens[i_];                                                          \
                if (len_ <= 1024 && !piece) {  /* one chunk: its own root */                       \
                    next++;                                                                        \
                    ptr[l] = msgs[i_]; left[l] = len_; ctr[l] = 0;                                 \
                    flags[l] = MB_MODE(c) | MB_CHUNK_START; rootm |= 1u << (l);                 \
                    dst[l] = out + i_ * stride;                                                    \
                    got_ = 1;                                                                      \
                    break;                                                                         \
                }                                                                                  \
                uint32_t nch_ = len_ ? (len_ + 1023) / 1024 : 1;                                   \
                if (nch_ > MB_SLOTS) {  /* too long to share the window: after this pass */        \
                    if (w->nlong == MB_LONG) { stop = next; break; }                               \
                    w->longs[w->nlong++] = i_;                                                     \
                    next++;                                                                        \
                    continue;                                                                      \
                }                                                                                  \
                if (w->used + nch_ > MB_SLOTS) { stop = next; break; }                             \
                next++;                                                                            \
                w->frames[w->nframes].slot = w->used;                                              \
                w->frames[w->nframes].n = nch_;                                                    \
                w->frames[w->nframes].dst = piece ? NULL : out + i_ * stride;                      \
                w->nframes++;                                                                      \
                cp = msgs[i_]; crem = len_; cctr = base; cslot = w->slots[w->used];                \
                w->used += nch_;                                                                   \
            }                                                                                      \
            got_;                                                                                  \
        })

    for (unsigned l = 0; l < L; l++) {
        if (MB_TAKE(l)) {
            active |= 1u << l;
        } else {
            ptr[l] = MB_FN(_zero);
            left[l] = 0; flags[l] = 0; ctr[l] = 0;
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
            flags[l] |= MB_CHUNK_END | (((rootm >> l) & 1) ? MB_ROOT : 0);
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
        MB_FN(_compress)(cv, m, V_LOAD(ctr), V_SPLAT(0), V_LOAD(blen), V_LOAD(flags));
        for (unsigned l = 0; l < L; l++) {
            if (left[l] > 64) {  /* ending lanes are reset below, idle lanes stay as they are */
                ptr[l] += 64;
                left[l] -= 64;
                flags[l] = MB_MODE(c);
            }
        }
        if (!ending) continue;
        /* once per chunk: chaining values (or root outputs) of the lanes that ended, then refill */
        MB_STORE_CV(cv, rows);
        unsigned refill = 0;
        do {
            unsigned l = (unsigned)__builtin_ctz(ending);
            ending &= ending - 1;
            /* little-endian hosts only (x86-64, arm64); fixed-size copies (OUT is not a constant here) */
            memcpy(dst[l], rows[l], 16);
            if (OUT == 32 || !((rootm >> l) & 1)) memcpy(dst[l] + 16, rows[l] + 4, 16);
            if (MB_TAKE(l)) {
                refill |= 1u << l;
            } else {
                active &= ~(1u << l);
                ptr[l] = MB_FN(_zero);
                left[l] = 0; flags[l] = 0;
            }
        } while (ending);
        if (refill) {
            /* chaining value back to the key in the refilled lanes, through memory (once a chunk) */
            uint32_t wv[8][L] __attribute__((aligned(64)));
            for (int i = 0; i < 8; i++) V_STORE(wv[i], cv[i]);
            for (unsigned r = refill; r; r &= r - 1) {
                unsigned l = (unsigned)__builtin_ctz(r);
                for (int i = 0; i < 8; i++) wv[i][l] = c->u.b3.key[i];
            }
            for (int i = 0; i < 8; i++) cv[i] = V_LOAD(wv[i]);
        }
    }
    #undef MB_TAKE
    *next_io = next;
}

/* Parent nodes: block blk[i] (left || right chaining value, 64 bytes), flags mode | PARENT |
 * fl[i], result to dst[i] (OUT bytes when fl[i] has ROOT, else 32). Every block of a group of lanes is
 * loaded before any result is stored, so a level may be written over the slots it reads. */
static inline __attribute__((always_inline)) void MB_FN(_parents)(const MB_FN(_window) *w,
                                                                  const uint8_t *const *blk, uint8_t *const *dst,
                                                                  const uint32_t *fl, size_t n, const size_t OUT) {
    enum { L = MB_LANES };
    const uint32_t *key = w->c->u.b3.key;
    size_t i = 0;
    for (; n - i >= MB_PMIN; i += L) {
        const uint8_t *bp[L];
        uint32_t flags[L] __attribute__((aligned(64)));
        size_t k = n - i < L ? n - i : L;
        for (size_t l = 0; l < L; l++) {
            bp[l] = l < k ? blk[i + l] : MB_FN(_zero);
            flags[l] = l < k ? (MB_MODE(w->c) | MB_PARENT | fl[i + l]) : 0;
        }
        MB_V cv[8], m[16];
        for (int j = 0; j < 8; j++) cv[j] = V_SPLAT(key[j]);
        MB_LOAD_MSG(bp, m);
        MB_FN(_compress)(cv, m, V_SPLAT(0), V_SPLAT(0), V_SPLAT(64), V_LOAD(flags));
        uint32_t rows[L][8] __attribute__((aligned(64)));
        MB_STORE_CV(cv, rows);
        for (size_t l = 0; l < k; l++) {
            memcpy(dst[i + l], rows[l], 16);
            if (OUT == 32 || !(fl[i + l] & MB_ROOT)) memcpy(dst[i + l] + 16, rows[l] + 4, 16);
        }
        if (k < L) return;
    }
    for (; i < n; i++) {  /* narrow level: one compression at a time */
        uint32_t cvs[8];
        memcpy(cvs, key, 32);
        w->one(cvs, blk[i], 0, 64, MB_MODE(w->c) | MB_PARENT | fl[i]);
        memcpy(dst[i], cvs, (fl[i] & MB_ROOT) ? OUT : 32);
    }
}

/* Tree pass: reduce every frame of the window to its root (or, dst NULL, to one node in its first slot). */
static inline __attribute__((always_inline)) void MB_FN(_trees)(MB_FN(_window) *w, const size_t OUT) {
    const uint8_t *blk[MB_SLOTS / 2];
    uint8_t *dst[MB_SLOTS / 2];
    uint32_t fl[MB_SLOTS / 2];
    for (;;) {
        size_t k = 0;
        for (unsigned f = 0; f < w->nframes; f++) {
            MB_FN(_frame) *fr = &w->frames[f];
            uint8_t(*s)[32] = &w->slots[fr->slot];
            for (uint32_t j = 0; j + 1 < fr->n; j += 2) {
                blk[k] = s[j];
                dst[k] = s[j / 2];
                fl[k] = 0;
                if (fr->n == 2 && fr->dst) {  /* the last merge of a frame: its root */
                    dst[k] = fr->dst;
                    fl[k] = MB_ROOT;
                }
                k++;
            }
        }
        if (!k) return;
        MB_FN(_parents)(w, blk, dst, fl, k, OUT);
        for (unsigned f = 0; f < w->nframes; f++) {
            MB_FN(_frame) *fr = &w->frames[f];
            if (fr->n < 2) continue;
            if (fr->n & 1) memcpy(w->slots[fr->slot + fr->n / 2], w->slots[fr->slot + fr->n - 1], 32);
            fr->n = (fr->n + 1) / 2;
            if (fr->n == 1 && fr->dst) fr->n = 0;  /* root written */
        }
    }
}

/* keyed parent(left, right) on the single-message compression (stack merges of a long frame) */
static void MB_FN(_parent1)(const lt_dctx *c, lt_b3_compress_fn one, const uint32_t left[8], const uint32_t right[8],
                            uint32_t flags, uint32_t cv[8]) {
    uint8_t block[64];
    memcpy(block, left, 32);
    memcpy(block + 32, right, 32);
    memcpy(cv, c->u.b3.key, 32);
    one(cv, block, 0, 64, MB_MODE(c) | MB_PARENT | flags);
}

/* Chaining value of the subtree over len bytes (1 .. MB_SLOTS chunks) at chunk `base`. */
static __attribute__((noinline)) void MB_FN(_subtree)(MB_FN(_window) *w, const uint8_t *msg, uint32_t len,
                                                      uint32_t base, uint32_t cv[8]) {
    size_t next = 0;
    w->used = 0;
    w->nframes = 0;
    w->nlong = 0;
    MB_FN(_chunks)(w, &msg, &len, 1, &next, NULL, 0, 32, base, 1);
    MB_FN(_trees)(w, 32);
    memcpy(cv, w->slots[0], 32);
}

/* A frame of more than MB_SLOTS chunks: complete subtrees of MB_SLOTS chunks merged on a stack as
 * the tree fills (the number of subtrees so far has a trailing zero bit), then the rest of the frame
 * (1 .. MB_SLOTS chunks, its own left-complete subtree) folded up the stack, the last merge ROOT. */
static __attribute__((noinline)) void MB_FN(_large)(const lt_dctx *c, lt_b3_compress_fn one, const uint8_t *msg,
                                                    uint32_t len, uint8_t *out, size_t OUT) {
    MB_FN(_window) w;
    w.c = c;
    w.one = one;
    uint32_t stack[54][8], cv[8];
    int depth = 0;
    uint32_t subtrees = 0;
    const uint32_t G = MB_SLOTS * 1024;
    while (len > G) {
        MB_FN(_subtree)(&w, msg, G, subtrees * MB_SLOTS, cv);
        subtrees++;
        for (uint32_t t = subtrees; (t & 1) == 0; t >>= 1) {
            depth--;
            MB_FN(_parent1)(c, one, stack[depth], cv, 0, cv);
        }
        memcpy(stack[depth++], cv, 32);
        msg += G;
        len -= G;
    }
    MB_FN(_subtree)(&w, msg, len, subtrees * MB_SLOTS, cv);
    while (depth > 0) {
        depth--;
        MB_FN(_parent1)(c, one, stack[depth], cv, depth == 0 ? MB_ROOT : 0, cv);
    }
    memcpy(out, cv, OUT);
}

static __attribute__((noinline)) void MB_FN(_many)(const lt_dctx *c, lt_b3_compress_fn one,
                                                   const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                                                   uint8_t *out, size_t stride, const size_t OUT) {
    MB_FN(_window) w;
    w.c = c;
    w.one = one;
    size_t next = 0;
    while (next < n) {
        w.used = 0;
        w.nframes = 0;
        w.nlong = 0;
        MB_FN(_chunks)(&w, msgs, lens, n, &next, out, stride, OUT, 0, 0);
        MB_FN(_trees)(&w, OUT);
        for (unsigned i = 0; i < w.nlong; i++)
            MB_FN(_large)(c, one, msgs[w.longs[i]], lens[w.longs[i]], out + w.longs[i] * stride, OUT);
    }
}

void MB_NAME(const lt_dctx *c, lt_b3_compress_fn one, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
             uint8_t *out, size_t out_stride) {
    if (c->out_len == 16)
        MB_FN(_many)(c, one, msgs, lens, n, out, out_stride, 16);
    else
        MB_FN(_many)(c, one, msgs, lens, n, out, out_stride, 32);
}
