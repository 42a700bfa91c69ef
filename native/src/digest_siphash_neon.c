/*
 * Multi-buffer SipHash on AArch64 NEON: four messages as two independent groups of two 64-bit
 * lanes (two uint64x2_t per state word), so one group's SipRound latency overlaps the other's.
 * Rotates are SHL + SRI (shift left, then shift right and insert), by 32 a REV64 of the 32-bit
 * halves. NEON has no gather: the per-step word of each lane is a scalar load inserted into its
 * lane; while all four lanes are 8 words deep, words come from 16-byte loads and ZIP1/ZIP2
 * transposes. Four lanes keep the state (8 registers) and a 64-byte block of every lane
 * (16 registers) within the 32 vector registers. The lane scheme is in siphash_mb.h.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_NEON_PATHS
#include <arm_neon.h>

typedef struct { uint64x2_t lo, hi; } mbn_v;  /* lanes 0-1, 2-3 */

static inline mbn_v mbn_load(const uint64_t *p) { return (mbn_v){vld1q_u64(p), vld1q_u64(p + 2)}; }
static inline void mbn_store(uint64_t *p, mbn_v v) {
    vst1q_u64(p, v.lo);
    vst1q_u64(p + 2, v.hi);
}
static inline mbn_v mbn_splat(uint64_t x) {
    uint64x2_t s = vdupq_n_u64(x);
    return (mbn_v){s, s};
}
static inline mbn_v mbn_add(mbn_v a, mbn_v b) { return (mbn_v){vaddq_u64(a.lo, b.lo), vaddq_u64(a.hi, b.hi)}; }
static inline mbn_v mbn_xor(mbn_v a, mbn_v b) { return (mbn_v){veorq_u64(a.lo, b.lo), veorq_u64(a.hi, b.hi)}; }
/* b is a constant 1..63 at every use (a macro keeps the shift counts immediate) */
#define MBN_ROT(x, b)                                                                              \
    ((b) == 32 ? vreinterpretq_u64_u32(vrev64q_u32(vreinterpretq_u32_u64(x)))                       \
               : vsriq_n_u64(vshlq_n_u64((x), (b)), (x), 64 - (b)))
#define MBN_ROTL(a, b) ((mbn_v){MBN_ROT((a).lo, b), MBN_ROT((a).hi, b)})

static inline mbn_v mbn_has(mbn_v v) {  /* all ones in lanes with v != 0 */
    return (mbn_v){vtstq_u64(v.lo, v.lo), vtstq_u64(v.hi, v.hi)};
}
/* per lane: the word at ptr where m is set, else tail */
static inline uint64x2_t mbn_gather2(uint64x2_t tail, uint64x2_t m, uint64x2_t ptr) {
    uint64_t t0 = vgetq_lane_u64(tail, 0), t1 = vgetq_lane_u64(tail, 1);
    if (vgetq_lane_u64(m, 0)) memcpy(&t0, (const void *)(uintptr_t)vgetq_lane_u64(ptr, 0), 8);
    if (vgetq_lane_u64(m, 1)) memcpy(&t1, (const void *)(uintptr_t)vgetq_lane_u64(ptr, 1), 8);
    return vcombine_u64(vcreate_u64(t0), vcreate_u64(t1));
}
static inline mbn_v mbn_gather(mbn_v tail, mbn_v m, mbn_v ptr) {
    return (mbn_v){mbn_gather2(tail.lo, m.lo, ptr.lo), mbn_gather2(tail.hi, m.hi, ptr.hi)};
}
static inline unsigned mbn_bits(mbn_v m) {
    return (unsigned)(vgetq_lane_u64(m.lo, 0) & 1) | (unsigned)(vgetq_lane_u64(m.lo, 1) & 1) << 1 |
           (unsigned)(vgetq_lane_u64(m.hi, 0) & 1) << 2 | (unsigned)(vgetq_lane_u64(m.hi, 1) & 1) << 3;
}
static inline int mbn_all8(mbn_v v) {  /* every lane has more than 7 whole words left */
    uint64x2_t seven = vdupq_n_u64(7);
    uint64x2_t ge = vandq_u64(vcgtq_u64(v.lo, seven), vcgtq_u64(v.hi, seven));
    return (vgetq_lane_u64(ge, 0) & vgetq_lane_u64(ge, 1)) != 0;
}
/* words 0-7 of the 64 bytes at pa[l] + off in each lane l: per pair of lanes, 2 x 2 transposes of
 * 16-byte loads */
static inline void mbn_load8(const uint64_t *pa, uint32_t off, mbn_v m[8]) {
    for (int h = 0; h < 2; h++) {
        const uint64_t *p0 = (const uint64_t *)(uintptr_t)(pa[2 * h] + off);
        const uint64_t *p1 = (const uint64_t *)(uintptr_t)(pa[2 * h + 1] + off);
        for (int k = 0; k < 4; k++) {
            /* 16-byte loads of arbitrary alignment: vld1q_u8 has no alignment requirement */
            uint64x2_t a = vreinterpretq_u64_u8(vld1q_u8((const uint8_t *)(p0 + 2 * k)));
            uint64x2_t b = vreinterpretq_u64_u8(vld1q_u8((const uint8_t *)(p1 + 2 * k)));
            uint64x2_t even = vzip1q_u64(a, b), odd = vzip2q_u64(a, b);
            if (h == 0) {
                m[2 * k].lo = even;
                m[2 * k + 1].lo = odd;
            } else {
                m[2 * k].hi = even;
                m[2 * k + 1].hi = odd;
            }
        }
    }
}

/* the first nbytes (0..63) bytes at pa[l] + off, zero-padded: copied into a staging block per lane
 * so nothing past the message is read (it may end a mapped page) */
static inline void mbn_loadpart(const uint64_t *pa, uint32_t off, uint32_t nbytes, mbn_v m[8]) {
    uint8_t stage[4][64] __attribute__((aligned(16)));
    uint64_t sp[4];
    for (int l = 0; l < 4; l++) {
        memset(stage[l], 0, 64);
        memcpy(stage[l], (const uint8_t *)(uintptr_t)(pa[l] + off), nbytes);
        sp[l] = (uint64_t)(uintptr_t)stage[l];
    }
    mbn_load8(sp, 0, m);
}

#define MB_NAME lt_siphash_many_neon
#define MB_LANES 4
#define MB_V mbn_v
#define V_LOAD(p) mbn_load(p)
#define V_STORE(p, v) mbn_store((p), (v))
#define V_SPLAT(x) mbn_splat(x)
#define V_ADD(a, b) mbn_add((a), (b))
#define V_XOR(a, b) mbn_xor((a), (b))
#define V_ROTL(a, b) MBN_ROTL(a, b)
#define MB_MASK mbn_v
#define MB_HAS(v) mbn_has(v)
#define MB_GATHER(tail, m, ptr) mbn_gather((tail), (m), (ptr))
#define MB_DEC(v, m) mbn_add((v), (m)) /* m is all ones (-1) in the lanes to decrement */
#define MB_BITS(m) mbn_bits(m)
#define MB_ALL8(v) mbn_all8(v)
#define MB_LOAD8(pa, off, m) mbn_load8((pa), (off), (m))
#define MB_LOADPART(pa, off, nbytes, m) mbn_loadpart((pa), (off), (nbytes), (m))
#include "siphash_mb.h"

#endif
