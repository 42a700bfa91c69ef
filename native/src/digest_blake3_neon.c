/*
 * Multi-buffer keyed BLAKE3 on AArch64 NEON: four chunks or parent nodes at once in the four 32-bit
 * lanes of uint32x4_t vectors, from one frame or several (the scheme is in blake3_mb.h). Rotations:
 * by 16 a REV32 of the 16-bit halves, by 12 / 8 / 7 SHL + SRI. Blocks are loaded 16 bytes at a time
 * and transposed (four 4 x 4 transposes of 32-bit words per block, TRN1/TRN2 on 32- then 64-bit
 * elements). Single messages and narrow tree levels run the portable code.
 */
#include "ledgertool.h"
#include "lt_internal.h"

#if LT_NEON_PATHS
#include <arm_neon.h>

/* rows r[0..3] of four 32-bit words -> columns (r[w] lane l = old r[l] word w) */
static inline __attribute__((always_inline)) void b3n_transpose(uint32x4_t r[4]) {
    uint32x4_t t0 = vtrn1q_u32(r[0], r[1]), t1 = vtrn2q_u32(r[0], r[1]);  /* a0 b0 a2 b2 | a1 b1 a3 b3 */
    uint32x4_t t2 = vtrn1q_u32(r[2], r[3]), t3 = vtrn2q_u32(r[2], r[3]);  /* c0 d0 c2 d2 | c1 d1 c3 d3 */
    r[0] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
    r[1] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
    r[2] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
    r[3] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
}

static inline __attribute__((always_inline)) void b3n_load_msg(const uint8_t *const *bp, uint32x4_t m[16]) {
    for (int q = 0; q < 4; q++) {  /* words 4q .. 4q+3 of every lane */
        uint32x4_t r[4];
        for (int l = 0; l < 4; l++) r[l] = vreinterpretq_u32_u8(vld1q_u8(bp[l] + 16 * q));
        b3n_transpose(r);
        for (int j = 0; j < 4; j++) m[4 * q + j] = r[j];
    }
}

static inline __attribute__((always_inline)) void b3n_store_cv(const uint32x4_t cv[8], uint32_t rows[4][8]) {
    uint32x4_t lo[4] = {cv[0], cv[1], cv[2], cv[3]}, hi[4] = {cv[4], cv[5], cv[6], cv[7]};
    b3n_transpose(lo);
    b3n_transpose(hi);
    for (int l = 0; l < 4; l++) {
        vst1q_u32(rows[l], lo[l]);
        vst1q_u32(rows[l] + 4, hi[l]);
    }
}

#define B3N_ROTR(x, n) vsriq_n_u32(vshlq_n_u32((x), 32 - (n)), (x), (n))

#define MB_NAME lt_blake3_many_neon
#define MB_LANES 4
#define MB_V uint32x4_t
#define V_LOAD(p) vld1q_u32(p)
#define V_STORE(p, v) vst1q_u32((p), (v))
#define V_SPLAT(x) vdupq_n_u32(x)
#define V_ADD(a, b) vaddq_u32((a), (b))
#define V_XOR(a, b) veorq_u32((a), (b))
#define V_ROT16(x) vreinterpretq_u32_u16(vrev32q_u16(vreinterpretq_u16_u32(x)))
#define V_ROT12(x) B3N_ROTR(x, 12)
#define V_ROT8(x) B3N_ROTR(x, 8)
#define V_ROT7(x) B3N_ROTR(x, 7)
#define MB_LOAD_MSG(bp, m) b3n_load_msg((bp), (m))
#define MB_STORE_CV(cv, rows) b3n_store_cv((cv), (rows))
#include "blake3_mb.h"

#endif
