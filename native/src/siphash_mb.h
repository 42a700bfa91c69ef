/*
 * Multi-buffer SipHash-c-d (64- and 128-bit output): MB_LANES (4, 8 or 16) independent messages in
 * 64-bit SIMD lanes, included by digest_siphash_avx2.c (8 lanes: two 4-lane ymm groups),
 * digest_siphash_avx512.c (16 lanes: two 8-lane zmm groups, vprolq rotates) and, on arm64,
 * digest_siphash_neon.c (4 lanes: two groups of two in NEON registers) with these macros defined. Each lane group is one dependency chain through a SipRound; the groups of one vector
 * type are independent, so their instructions interleave and the core overlaps their latencies.
 *
 *   MB_NAME                   name of the function to define (an lt_digest_many_fn)
 *   MB_LANES                  lanes (default 8)
 *   MB_V                      type of MB_LANES 64-bit lanes
 *   V_LOAD(p) / V_STORE(p, v) lanes from / to uint64_t[MB_LANES]
 *   V_SPLAT(x), V_ADD(a, b), V_XOR(a, b), V_ROTL(a, constant)
 *   MB_MASK                   type of a lane mask
 *   MB_HAS(vfull)             mask of lanes with a whole 8-byte word still to absorb
 *   MB_GATHER(tail, m, ptr)   per lane: *(u64 *)ptr where m is set, else tail
 *   MB_DEC(vfull, m)          vfull - 1 where m is set
 *   MB_BITS(m)                the mask as MB_LANES bits (bit l = lane l)
 *   MB_ALL8(vfull)            every lane has at least 8 whole words left
 *   MB_LOAD8(ptrs, off, m)    m[w] = word w of the 64 bytes at ptrs[l] + off in each lane l (ptrs:
 *                             uint64_t[MB_LANES] addresses), by 64-byte loads and transposes
 *   MB_LOAD2(ptrs, off, m)    optional: m[0..1] as MB_LOAD8 for 16 bytes (fewer live registers)
 *   MB_LOAD1(ptrs, off)       optional, with MB_LOAD2: word 0 of the 8 bytes at ptrs[l] + off in each
 *                             lane; with MB_SHR(v, n) (every lane shifted right by n, 1..63 bits, n the
 *                             same for all) it replaces MB_LOADPART in lockstep groups of >= 8 bytes
 *   MB_LOADPART(ptrs, off, nbytes, m)   the same for the first nbytes (0..63) bytes at ptrs[l] + off,
 *                             zero-padded; reads no byte past them (they may end a mapped page)
 *
 * Scheme (one step = one message word in every lane):
 *   - a lane absorbs its message's whole words by gathering through a per-lane pointer, then the
 *     last word (remaining bytes | len << 56), prepared when the lane was filled;
 *   - a lane that has absorbed its last word is done compressing: its state goes to a finalisation
 *     queue (no per-lane work in the round code) and the lane is refilled at once with the next
 *     message (the initial state depends on the key only), so lanes never wait for the longest
 *     message of a group;
 *   - MB_LANES queued states are finalised together in the same lanes (d rounds, or 2 x d for 128-bit
 *     output) and their digests stored to each message's output slot.
 *
 * Lockstep groups: when MB_LANES consecutive messages of a batch have the same length (every frame
 * of a minimum-size or MTU-size run, and every frame of the 64-byte benchmarks), they go through
 * MB_FN(_lockstep) instead: no per-lane pointers, counters or gathers, contiguous loads and
 * transposes for every word (the last, partial one too), and the finalisation straight from the
 * registers, with no queue. The messages between such groups take the lane scheme above.
 * With MB_LOAD1 (AVX2) a group of >= 8-byte messages reads its partial last word as the 8 bytes that
 * end each message, shifted down, and an odd last whole word from the 16 bytes that end with it: no
 * masked loads and no byte-by-byte tail (a 60-byte minimum frame cost twice a 64-byte one with them).
 * Word loads are little-endian (x86-64, arm64). Results equal lt_siphash128 / lt_siphash64 byte for
 * byte; tests/test_multibuffer.py checks mixed lengths on every path (native/tests/selftest.c on arm64).
 */
#ifndef MB_NAME
#error "define MB_NAME and the MB_* lane operations before including siphash_mb.h"
#endif
#ifndef MB_LANES
#define MB_LANES 8
#endif
#define MB_FULL ((1u << MB_LANES) - 1)

typedef MB_V mb_v8;
#define MB_ABSORB(m)                                                                               \
    do {                                                                                           \
        v3 = V_XOR(v3, (m));                                                                       \
        for (int i_ = 0; i_ < C; i_++) MB_ROUND(v0, v1, v2, v3);                                   \
        v0 = V_XOR(v0, (m));                                                                       \
    } while (0)

#define MB_ROUND(v0, v1, v2, v3)                                                                   \
    do {                                                                                           \
        v0 = V_ADD(v0, v1); v1 = V_ROTL(v1, 13); v1 = V_XOR(v1, v0); v0 = V_ROTL(v0, 32);          \
        v2 = V_ADD(v2, v3); v3 = V_ROTL(v3, 16); v3 = V_XOR(v3, v2);                               \
        v0 = V_ADD(v0, v3); v3 = V_ROTL(v3, 21); v3 = V_XOR(v3, v0);                               \
        v2 = V_ADD(v2, v1); v1 = V_ROTL(v1, 17); v1 = V_XOR(v1, v2); v2 = V_ROTL(v2, 32);          \
    } while (0)

#define MB_CAT2(a, b) a##b
#define MB_CAT(a, b) MB_CAT2(a, b)
#define MB_FN(x) MB_CAT(MB_NAME, x)

/* The last word of a message: its 0..7 trailing bytes and the length byte (SipHash padding). */
static inline uint64_t MB_FN(_last_word)(const uint8_t *p, uint32_t len) {
    const uint8_t *t = p + (len & ~7u);
    uint64_t b = ((uint64_t)len) << 56;
    switch (len & 7) {
    case 7: b |= ((uint64_t)t[6]) << 48; /* fall through */
    case 6: b |= ((uint64_t)t[5]) << 40; /* fall through */
    case 5: b |= ((uint64_t)t[4]) << 32; /* fall through */
    case 4: b |= ((uint64_t)t[3]) << 24; /* fall through */
    case 3: b |= ((uint64_t)t[2]) << 16; /* fall through */
    case 2: b |= ((uint64_t)t[1]) << 8;  /* fall through */
    case 1: b |= ((uint64_t)t[0]); break;
    case 0: break;
    }
    return b;
}

typedef struct {
    uint64_t v0[MB_LANES], v1[MB_LANES], v2[MB_LANES], v3[MB_LANES];  /* compressed, to finalise */
    uint8_t *dst[MB_LANES];
    unsigned n;
} MB_FN(_queue);

static inline __attribute__((always_inline)) void MB_FN(_finalise)(MB_FN(_queue) *q, const int D, const int O128) {
    mb_v8 v0 = V_LOAD(q->v0), v1 = V_LOAD(q->v1), v2 = V_LOAD(q->v2), v3 = V_LOAD(q->v3);
    v2 = V_XOR(v2, V_SPLAT(O128 ? 0xee : 0xff));
    for (int i = 0; i < D; i++) MB_ROUND(v0, v1, v2, v3);
    uint64_t r0[MB_LANES], r1[MB_LANES];
    V_STORE(r0, V_XOR(V_XOR(v0, v1), V_XOR(v2, v3)));
    if (O128) {
        v1 = V_XOR(v1, V_SPLAT(0xdd));
        for (int i = 0; i < D; i++) MB_ROUND(v0, v1, v2, v3);
        V_STORE(r1, V_XOR(V_XOR(v0, v1), V_XOR(v2, v3)));
    }
    for (unsigned i = 0; i < q->n; i++) {
        memcpy(q->dst[i], &r0[i], 8);  /* little-endian hosts only (x86-64, arm64) */
        if (O128) memcpy(q->dst[i] + 8, &r1[i], 8);
    }
    q->n = 0;
}

static inline __attribute__((always_inline)) void MB_FN(_run)(const lt_dctx *c, const uint8_t *const *msgs,
                                                              const uint32_t *lens, size_t n, uint8_t *out,
                                                              size_t stride, const int C, const int D,
                                                              const int O128) {
    const uint64_t k0 = lt_load_le64(c->u.sip.key), k1 = lt_load_le64(c->u.sip.key + 8);
    const uint64_t init[4] = {0x736f6d6570736575ULL ^ k0, 0x646f72616e646f6dULL ^ k1 ^ (O128 ? 0xee : 0),
                              0x6c7967656e657261ULL ^ k0, 0x7465646279746573ULL ^ k1};
    mb_v8 v0 = V_SPLAT(init[0]), v1 = V_SPLAT(init[1]), v2 = V_SPLAT(init[2]), v3 = V_SPLAT(init[3]);
    const mb_v8 eight = V_SPLAT(8);
    /* per lane: next word address, whole words left, last word, output slot */
    uint64_t ap[MB_LANES] = {0}, af[MB_LANES] = {0}, at[MB_LANES] = {0};
    uint8_t *dst[MB_LANES];
    unsigned active = 0;
    size_t next = 0;
    MB_FN(_queue) q;
    q.n = 0;
    for (unsigned l = 0; l < MB_LANES && next < n; l++, next++) {
        ap[l] = (uint64_t)(uintptr_t)msgs[next];
        af[l] = lens[next] >> 3;
        at[l] = MB_FN(_last_word)(msgs[next], lens[next]);
        dst[l] = out + next * stride;
        active |= 1u << l;
    }
    mb_v8 vptr = V_LOAD(ap), vfull = V_LOAD(af), vtail = V_LOAD(at);
    while (active) {
        if (active == MB_FULL && MB_ALL8(vfull)) {
            /* fast path, every lane 8 whole words deep: contiguous loads and a transpose instead of
             * eight gathers, and no lane can finish (its last word is still to come) */
            uint64_t pa[MB_LANES];
            mb_v8 m[8];
            V_STORE(pa, vptr);
            MB_LOAD8(pa, 0, m);
            /* frames come from memory, not cache, in the engine: fetch each lane's data ahead */
            for (int l = 0; l < MB_LANES; l++) __builtin_prefetch((const void *)(uintptr_t)(pa[l] + 512));
            MB_ABSORB(m[0]); MB_ABSORB(m[1]); MB_ABSORB(m[2]); MB_ABSORB(m[3]);
            MB_ABSORB(m[4]); MB_ABSORB(m[5]); MB_ABSORB(m[6]); MB_ABSORB(m[7]);
            vptr = V_ADD(vptr, V_SPLAT(64));
            vfull = V_ADD(vfull, V_SPLAT((uint64_t)-8));
            continue;
        }
        MB_MASK has = MB_HAS(vfull);
        mb_v8 m = MB_GATHER(vtail, has, vptr);
        MB_ABSORB(m);
        vptr = V_ADD(vptr, eight);
        vfull = MB_DEC(vfull, has);
        unsigned done = ~MB_BITS(has) & active;  /* lanes that just absorbed their last word */
        if (!done) continue;
        /* rare path (once per message): lanes go through memory so the vectors stay in registers
         * in the loop above */
        uint64_t a0[MB_LANES], a1[MB_LANES], a2[MB_LANES], a3[MB_LANES];
        V_STORE(a0, v0); V_STORE(a1, v1); V_STORE(a2, v2); V_STORE(a3, v3);
        V_STORE(ap, vptr); V_STORE(af, vfull); V_STORE(at, vtail);
        do {
            unsigned l = (unsigned)__builtin_ctz(done);
            done &= done - 1;
            q.v0[q.n] = a0[l]; q.v1[q.n] = a1[l]; q.v2[q.n] = a2[l]; q.v3[q.n] = a3[l];
            q.dst[q.n++] = dst[l];
            if (q.n == MB_LANES) MB_FN(_finalise)(&q, D, O128);
            if (next < n) {
                a0[l] = init[0]; a1[l] = init[1]; a2[l] = init[2]; a3[l] = init[3];
                ap[l] = (uint64_t)(uintptr_t)msgs[next];
                af[l] = lens[next] >> 3;
                at[l] = MB_FN(_last_word)(msgs[next], lens[next]);
                dst[l] = out + next * stride;
                next++;
            } else {
                active &= ~(1u << l);
                af[l] = 0;
                at[l] = 0;
            }
        } while (done);
        v0 = V_LOAD(a0); v1 = V_LOAD(a1); v2 = V_LOAD(a2); v3 = V_LOAD(a3);
        vptr = V_LOAD(ap); vfull = V_LOAD(af); vtail = V_LOAD(at);
    }
    if (q.n) MB_FN(_finalise)(&q, D, O128);
}

/* The digests of one lane group (r0: first 8 bytes, r1: the second 8 with 128-bit output) to each
 * message's output slot. */
static inline __attribute__((always_inline)) void MB_FN(_put)(mb_v8 r0, mb_v8 r1, uint8_t *out, size_t stride,
                                                              const int O128) {
    uint64_t a0[MB_LANES], a1[MB_LANES];
    V_STORE(a0, r0);
    if (O128) V_STORE(a1, r1);
    for (unsigned i = 0; i < MB_LANES; i++, out += stride) {
        memcpy(out, &a0[i], 8);  /* little-endian hosts only (x86-64, arm64) */
        if (O128) memcpy(out + 8, &a1[i], 8);
    }
}

/* MB_LANES messages of `len` bytes each, in lockstep (see the scheme above). */
static inline __attribute__((always_inline)) void MB_FN(_lockstep)(const uint64_t init[4],
                                                                   const uint8_t *const *msgs, uint32_t len,
                                                                   uint8_t *out, size_t stride, const int C,
                                                                   const int D, const int O128) {
    const uint64_t *pa = (const uint64_t *)(const void *)msgs;  /* 64-bit hosts: a pointer is a u64 address */
    mb_v8 v0 = V_SPLAT(init[0]), v1 = V_SPLAT(init[1]), v2 = V_SPLAT(init[2]), v3 = V_SPLAT(init[3]);
    mb_v8 m[8];
    const uint32_t whole = len & ~63u;  /* bytes in whole 64-byte blocks */
    for (uint32_t off = 0; off < whole; off += 64) {
#ifdef MB_LOAD2  /* 16 registers (AVX2): two words at a time, or the state spills */
        for (uint32_t o2 = 0; o2 < 64; o2 += 16) {
            MB_LOAD2(pa, off + o2, m);
            MB_ABSORB(m[0]); MB_ABSORB(m[1]);
        }
#else
        MB_LOAD8(pa, off, m);
        MB_ABSORB(m[0]); MB_ABSORB(m[1]); MB_ABSORB(m[2]); MB_ABSORB(m[3]);
        MB_ABSORB(m[4]); MB_ABSORB(m[5]); MB_ABSORB(m[6]); MB_ABSORB(m[7]);
#endif
    }
    /* the rest: 0..7 whole words, then the last word (0..7 trailing bytes | len << 56) */
    const uint32_t rest = len - whole, words = rest >> 3;
    const mb_v8 lenw = V_SPLAT(((uint64_t)len) << 56);
#ifdef MB_LOAD1
    if (rest && len >= 8) {
        /* no masks: two words at a time while two are left; an odd last word as the upper one of the
         * 16 bytes that end with it (len >= 16 then) or, for the only word, one 8-byte load; the
         * trailing bytes as the 8 bytes that end the message shifted down, all inside the message */
        const uint32_t wend = len & ~7u;  /* end of the whole words */
        uint32_t off = whole;
        for (; off + 16 <= wend; off += 16) {
            MB_LOAD2(pa, off, m);
            MB_ABSORB(m[0]); MB_ABSORB(m[1]);
        }
        if (off < wend) {
            if (wend >= 16) {
                MB_LOAD2(pa, wend - 16, m);
                MB_ABSORB(m[1]);
            } else {
                MB_ABSORB(MB_LOAD1(pa, 0));
            }
        }
        const uint32_t tail = len & 7;
        if (tail) MB_ABSORB(V_XOR(MB_SHR(MB_LOAD1(pa, len - 8), 64 - 8 * tail), lenw));
        else MB_ABSORB(lenw);
    } else
#endif
    if (rest) {
        MB_LOADPART(pa, whole, rest, m);
        for (uint32_t w = 0; w < words; w++) MB_ABSORB(m[w]);
        MB_ABSORB(V_XOR(m[words], lenw));
    } else {
        MB_ABSORB(lenw);
    }
    v2 = V_XOR(v2, V_SPLAT(O128 ? 0xee : 0xff));
    for (int i = 0; i < D; i++) MB_ROUND(v0, v1, v2, v3);
    mb_v8 r0 = V_XOR(V_XOR(v0, v1), V_XOR(v2, v3)), r1 = r0;
    if (O128) {
        v1 = V_XOR(v1, V_SPLAT(0xdd));
        for (int i = 0; i < D; i++) MB_ROUND(v0, v1, v2, v3);
        r1 = V_XOR(V_XOR(v0, v1), V_XOR(v2, v3));
    }
    MB_FN(_put)(r0, r1, out, stride, O128);
}

/* Lockstep groups as separate functions per parameter set: inlined into the function that also holds
 * the lane loop, their state spills (AVX2); left to GCC, not every set gets a specialised clone. */
typedef void (*MB_FN(_lock_fn))(const uint64_t init[4], const uint8_t *const *msgs, uint32_t len, uint8_t *out,
                                size_t stride, const lt_dctx *c);
#define MB_SPEC(tag, C, D, O)                                                                                 \
    static __attribute__((noinline)) void MB_FN(_lock_##tag)(const uint64_t init[4], const uint8_t *const *msgs, \
                                                             uint32_t len, uint8_t *out, size_t stride,        \
                                                             const lt_dctx *c) {                               \
        MB_FN(_lockstep)(init, msgs, len, out, stride, C, D, O);                                               \
    }
MB_SPEC(13_128, 1, 3, 1)
MB_SPEC(13_64, 1, 3, 0)
MB_SPEC(24_128, 2, 4, 1)
MB_SPEC(24_64, 2, 4, 0)
MB_SPEC(any, c->u.sip.c, c->u.sip.d, c->out_len == 16)
#undef MB_SPEC

/* Lockstep groups where MB_LANES consecutive lengths are equal, the lane scheme for the rest (one
 * call site, so the lane loop is inlined once). */
static inline __attribute__((always_inline)) void MB_FN(_batch)(const lt_dctx *c, const uint8_t *const *msgs,
                                                                const uint32_t *lens, size_t n, uint8_t *out,
                                                                size_t stride, const int C, const int D,
                                                                const int O128, MB_FN(_lock_fn) lock) {
    const uint64_t k0 = lt_load_le64(c->u.sip.key), k1 = lt_load_le64(c->u.sip.key + 8);
    const uint64_t init[4] = {0x736f6d6570736575ULL ^ k0, 0x646f72616e646f6dULL ^ k1 ^ (O128 ? 0xee : 0),
                              0x6c7967656e657261ULL ^ k0, 0x7465646279746573ULL ^ k1};
    size_t rest = 0;  /* messages [rest, g) go to the lane scheme, [g, g + MB_LANES) in lockstep */
    while (rest < n) {
        /* the first run of MB_LANES equal lengths from `rest`: one pass, the run length kept without a
         * data-dependent branch (on mixed traffic one would mispredict for about every frame) */
        size_t g = n, run = 1;
        for (size_t k = rest + 1; k < n; k++) {
            run = lens[k] == lens[k - 1] ? run + 1 : 1;
            if (run == MB_LANES) {
                g = k + 1 - MB_LANES;
                break;
            }
        }
        if (rest < g) MB_FN(_run)(c, msgs + rest, lens + rest, g - rest, out + rest * stride, stride, C, D, O128);
        if (g == n) break;
        lock(init, msgs + g, lens[g], out + g * stride, stride, c);
        rest = g + MB_LANES;
    }
}

void MB_NAME(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n, uint8_t *out,
             size_t out_stride) {
    /* the two standard parameter sets get unrolled rounds */
    int o128 = c->out_len == 16;
    if (c->u.sip.c == 1 && c->u.sip.d == 3) {
        if (o128) MB_FN(_batch)(c, msgs, lens, n, out, out_stride, 1, 3, 1, MB_FN(_lock_13_128));
        else MB_FN(_batch)(c, msgs, lens, n, out, out_stride, 1, 3, 0, MB_FN(_lock_13_64));
    } else if (c->u.sip.c == 2 && c->u.sip.d == 4) {
        if (o128) MB_FN(_batch)(c, msgs, lens, n, out, out_stride, 2, 4, 1, MB_FN(_lock_24_128));
        else MB_FN(_batch)(c, msgs, lens, n, out, out_stride, 2, 4, 0, MB_FN(_lock_24_64));
    } else {
        MB_FN(_batch)(c, msgs, lens, n, out, out_stride, c->u.sip.c, c->u.sip.d, o128, MB_FN(_lock_any));
    }
}
