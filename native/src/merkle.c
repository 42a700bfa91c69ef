/*
 * Merkle leaf hashes and the tree hash over them (RFC 9162 s2.1.1; docs/ledger-format.md).
 *
 * Leaves: SHA-256(0x00 || block of leaf_records records). The compression function (sha256.h)
 * follows the hmac-sha256-128 path in use (so forcing that algorithm to "portable", e.g.
 * LEDGERTOOL_CPU_PATH=hmac-sha256-128=portable, also tests the portable leaves). On the sha-ni path
 * the whole leaves go sixteen at a time through AVX-512 lanes on Intel cores that have them, then
 * four at a time through interleaved SHA-NI streams (ADR 0008: on Zen 3 SHA256RNDS2's latency
 * leaves the unit idle between one stream's dependent rounds; 4 streams are 2.1x one); the last,
 * shorter leaf and a remainder of fewer than four take the one-stream code (lt_merkle_lanes). The 0x00
 * prefix shifts the records by one byte, so each leaf is hashed through a 64-byte staging block
 * except for its whole aligned middle, which is consumed in place.
 * Every size is checked before it is used: ledger.json is unsigned, and a leaf_records of 2^60 + 1
 * once wrapped record_size * leaf_records to 48 bytes and wrote one leaf per record past `out`.
 */
#include <pthread.h>
#include <stdlib.h>

#include "ledgertool.h"
#include "ledgertool_testing.h"
#include "lt_internal.h"
#include "sha256.h"

#if LT_X86_PATHS
/* Four independent SHA-256 states, each compressing n consecutive 64-byte blocks from its own
 * pointer: sha256_blocks_shani's arithmetic, the four streams' instructions interleaved.
 * [ahead, ahead_end): bytes the caller reads next (the next group's leaves, or a file's next blocks),
 * touched with PREFETCH_LINES cache-line prefetches per block while the rounds run, so that their
 * first read from memory overlaps the hashing instead of stalling whatever reads them next (the
 * per-record tally of recfile.c took ~11 % of verify's samples in load stalls without it). A
 * prefetch is a hint: it never faults (nor raises SIGBUS on a truncated map) and reads nothing. */
#define PREFETCH_LINES 5
__attribute__((target("sha,sse4.1,ssse3")))
static void sha256_blocks_shani_x4(uint32_t st[4][8], const uint8_t *const pp[4], size_t n, const uint8_t *ahead,
                                   const uint8_t *ahead_end) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    __m128i abef[4], cdgh[4], save[4][2], m[4][4];
    const uint8_t *p[4];
    for (int s = 0; s < 4; s++) {
        __m128i dcba = _mm_loadu_si128((const __m128i *)st[s]), hgfe = _mm_loadu_si128((const __m128i *)(st[s] + 4));
        __m128i badc = _mm_shuffle_epi32(dcba, 0xB1), efgh = _mm_shuffle_epi32(hgfe, 0x1B);
        abef[s] = _mm_alignr_epi8(badc, efgh, 8);     /* lanes F,E,B,A */
        cdgh[s] = _mm_blend_epi16(efgh, badc, 0xF0);  /* lanes H,G,D,C */
        p[s] = pp[s];
    }
    for (; n; n--) {
        if (ahead < ahead_end) {
            for (int l = 0; l < PREFETCH_LINES; l++) _mm_prefetch((const char *)ahead + 64 * l, _MM_HINT_T0);
            ahead += 64 * PREFETCH_LINES;
        }
        for (int s = 0; s < 4; s++) save[s][0] = abef[s], save[s][1] = cdgh[s];
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
            __m128i k = _mm_loadu_si128((const __m128i *)(SHA256_K + 4 * g));
#pragma GCC unroll 4
            for (int s = 0; s < 4; s++) {
                __m128i w;
                if (g < 4) {
                    w = m[s][g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p[s] + 16 * g)), bswap);
                } else {
                    __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(m[s][g & 3], m[s][(g + 1) & 3]),
                                              _mm_alignr_epi8(m[s][(g + 3) & 3], m[s][(g + 2) & 3], 4));
                    w = m[s][g & 3] = _mm_sha256msg2_epu32(t, m[s][(g + 3) & 3]);
                }
                __m128i wk = _mm_add_epi32(w, k);
                cdgh[s] = _mm_sha256rnds2_epu32(cdgh[s], abef[s], wk);
                abef[s] = _mm_sha256rnds2_epu32(abef[s], cdgh[s], _mm_shuffle_epi32(wk, 0x0E));
            }
        }
        for (int s = 0; s < 4; s++) {
            abef[s] = _mm_add_epi32(abef[s], save[s][0]);
            cdgh[s] = _mm_add_epi32(cdgh[s], save[s][1]);
            p[s] += 64;
        }
    }
    for (int s = 0; s < 4; s++) {
        __m128i feba = _mm_shuffle_epi32(abef[s], 0x1B), ghcd = _mm_shuffle_epi32(cdgh[s], 0xB1);
        _mm_storeu_si128((__m128i *)st[s], _mm_blend_epi16(feba, ghcd, 0xF0));
        _mm_storeu_si128((__m128i *)(st[s] + 4), _mm_alignr_epi8(ghcd, feba, 8));
    }
}

/* Four leaves of `len` bytes each, at rec[0..3] (anywhere: in one buffer or in a file's blocks), into
 * out[0..3]: the message of each
 * is 0x00 || block (len + 1 bytes), so a staged first block (0x00 and 63 bytes) when len >= 63, the
 * aligned middle in place, and a padded tail of the same shape for all four. [ahead, ahead_end) is
 * prefetched while the middle is hashed (sha256_blocks_shani_x4). */
static void leaves_x4(const uint8_t *const rec[4], size_t len, uint8_t *const out[4], const uint8_t *ahead,
                      const uint8_t *ahead_end) {
    uint32_t st[4][8];
    uint8_t stage[4][128];
    const uint8_t *q[4];
    const size_t staged = len >= 63 ? 63 : 0;            /* record bytes in the staged first block */
    const size_t whole = staged ? (len - 63) / 64 : 0;   /* blocks hashed in place */
    const size_t rem = staged ? len - 63 - whole * 64 : len + 1;  /* message bytes in the tail */
    const size_t tail_len = rem + 9 <= 64 ? 64 : 128;
    for (int s = 0; s < 4; s++) memcpy(st[s], SHA256_H0, 32);
    if (staged) {
        for (int s = 0; s < 4; s++) {
            stage[s][0] = 0x00;
            memcpy(stage[s] + 1, rec[s], 63);
            q[s] = stage[s];
        }
        sha256_blocks_shani_x4(st, q, 1, NULL, NULL);
        if (whole) {
            for (int s = 0; s < 4; s++) q[s] = rec[s] + 63;
            sha256_blocks_shani_x4(st, q, whole, ahead, ahead_end);
        }
    }
    for (int s = 0; s < 4; s++) {
        memset(stage[s], 0, sizeof stage[s]);
        if (staged) {
            memcpy(stage[s], rec[s] + 63 + whole * 64, rem);
        } else {
            memcpy(stage[s] + 1, rec[s], len);  /* stage[s][0] = 0x00: the prefix */
        }
        stage[s][rem] = 0x80;
        lt_store_be64(stage[s] + tail_len - 8, (uint64_t)(len + 1) * 8);
        q[s] = stage[s];
    }
    sha256_blocks_shani_x4(st, q, tail_len / 64, NULL, NULL);
    for (int s = 0; s < 4; s++)
        for (int w = 0; w < 8; w++) lt_store_be32(out[s] + 4 * w, st[s][w]);
}
#endif

#if LT_X86_PATHS
/* Sixteen SHA-256 states in AVX-512 lanes (st[w][lane]: word w of each lane's state), each
 * compressing n consecutive 64-byte blocks from its own pointer. On Intel cores with AVX-512 this
 * beats the four SHA-NI streams (their SHA256RNDS2 is throughput-bound there: four streams are no
 * faster than one): 17 against 30 ns per 48-byte record on a Sapphire Rapids Xeon. Each lane's
 * block is one 64-byte load; a 16 x 16 transpose of 32-bit words (unpack 32, unpack 64, two 128-bit
 * shuffles) makes vector t hold word t of every lane. Rotates and the three-input functions are
 * single instructions (VPRORD, VPTERNLOGD). */
#define X16_ROR(x, n) _mm512_ror_epi32((x), (n))
__attribute__((target("avx512f,avx512bw")))
static void sha256_blocks_x16(uint32_t st[8][16], const uint8_t *const pp[16], size_t n) {
    const __m512i bswap = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
    __m512i s[8];
    for (int w = 0; w < 8; w++) s[w] = _mm512_loadu_si512(st[w]);
    for (size_t blk = 0; blk < n; blk++) {
        __m512i r[16], a[16], W[16];
        for (int l = 0; l < 16; l++)
            r[l] = _mm512_shuffle_epi8(_mm512_loadu_si512(pp[l] + 64 * blk), bswap);
        for (int i = 0; i < 16; i += 2) {
            a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
            a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
        }
        for (int j = 0; j < 16; j += 4) { /* r[j + k], 128-bit chunk c: word 4c + k of lanes j..j+3 */
            r[j] = _mm512_unpacklo_epi64(a[j], a[j + 2]);
            r[j + 1] = _mm512_unpackhi_epi64(a[j], a[j + 2]);
            r[j + 2] = _mm512_unpacklo_epi64(a[j + 1], a[j + 3]);
            r[j + 3] = _mm512_unpackhi_epi64(a[j + 1], a[j + 3]);
        }
        for (int k = 0; k < 4; k++) { /* chunk c of r[4j + k] becomes chunk j of W[4c + k] */
            __m512i lo01 = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x44), hi01 = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xEE);
            __m512i lo23 = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x44),
                    hi23 = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xEE);
            W[k] = _mm512_shuffle_i32x4(lo01, lo23, 0x88);
            W[4 + k] = _mm512_shuffle_i32x4(lo01, lo23, 0xDD);
            W[8 + k] = _mm512_shuffle_i32x4(hi01, hi23, 0x88);
            W[12 + k] = _mm512_shuffle_i32x4(hi01, hi23, 0xDD);
        }
        __m512i A = s[0], B = s[1], C = s[2], D = s[3], E = s[4], F = s[5], G = s[6], H = s[7];
#pragma GCC unroll 64
        for (int t = 0; t < 64; t++) {
            __m512i w;
            if (t < 16) {
                w = W[t];
            } else {
                __m512i w15 = W[(t - 15) & 15], w2 = W[(t - 2) & 15];
                __m512i s0 = _mm512_ternarylogic_epi32(X16_ROR(w15, 7), X16_ROR(w15, 18), _mm512_srli_epi32(w15, 3), 0x96);
                __m512i s1 = _mm512_ternarylogic_epi32(X16_ROR(w2, 17), X16_ROR(w2, 19), _mm512_srli_epi32(w2, 10), 0x96);
                w = W[t & 15] = _mm512_add_epi32(_mm512_add_epi32(W[t & 15], s0), _mm512_add_epi32(W[(t - 7) & 15], s1));
            }
            __m512i S1 = _mm512_ternarylogic_epi32(X16_ROR(E, 6), X16_ROR(E, 11), X16_ROR(E, 25), 0x96);
            __m512i ch = _mm512_ternarylogic_epi32(E, F, G, 0xCA);  /* e ? f : g */
            __m512i t1 = _mm512_add_epi32(_mm512_add_epi32(H, S1),
                                          _mm512_add_epi32(ch, _mm512_add_epi32(w, _mm512_set1_epi32((int)SHA256_K[t]))));
            __m512i S0 = _mm512_ternarylogic_epi32(X16_ROR(A, 2), X16_ROR(A, 13), X16_ROR(A, 22), 0x96);
            __m512i maj = _mm512_ternarylogic_epi32(A, B, C, 0xE8);
            H = G, G = F, F = E, E = _mm512_add_epi32(D, t1);
            D = C, C = B, B = A, A = _mm512_add_epi32(t1, _mm512_add_epi32(S0, maj));
        }
        s[0] = _mm512_add_epi32(s[0], A), s[1] = _mm512_add_epi32(s[1], B);
        s[2] = _mm512_add_epi32(s[2], C), s[3] = _mm512_add_epi32(s[3], D);
        s[4] = _mm512_add_epi32(s[4], E), s[5] = _mm512_add_epi32(s[5], F);
        s[6] = _mm512_add_epi32(s[6], G), s[7] = _mm512_add_epi32(s[7], H);
    }
    for (int w = 0; w < 8; w++) _mm512_storeu_si512(st[w], s[w]);
}

/* Sixteen leaves of `len` bytes each, at rec[0..15], into out[0..15]: leaves_x4's message shapes
 * (a staged first block, the aligned middle in place, a padded tail) in sixteen lanes. */
static void leaves_x16(const uint8_t *const rec[16], size_t len, uint8_t *const out[16]) {
    uint32_t st[8][16];
    uint8_t stage[16][128];
    const uint8_t *q[16];
    const size_t staged = len >= 63 ? 63 : 0;
    const size_t whole = staged ? (len - 63) / 64 : 0;
    const size_t rem = staged ? len - 63 - whole * 64 : len + 1;
    const size_t tail_len = rem + 9 <= 64 ? 64 : 128;
    for (int w = 0; w < 8; w++)
        for (int l = 0; l < 16; l++) st[w][l] = SHA256_H0[w];
    if (staged) {
        for (int l = 0; l < 16; l++) {
            stage[l][0] = 0x00;
            memcpy(stage[l] + 1, rec[l], 63);
            q[l] = stage[l];
        }
        sha256_blocks_x16(st, q, 1);
        if (whole) {
            for (int l = 0; l < 16; l++) q[l] = rec[l] + 63;
            sha256_blocks_x16(st, q, whole);
        }
    }
    for (int l = 0; l < 16; l++) {
        memset(stage[l], 0, sizeof stage[l]);
        if (staged) {
            memcpy(stage[l], rec[l] + 63 + whole * 64, rem);
        } else {
            memcpy(stage[l] + 1, rec[l], len);
        }
        stage[l][rem] = 0x80;
        lt_store_be64(stage[l] + tail_len - 8, (uint64_t)(len + 1) * 8);
        q[l] = stage[l];
    }
    sha256_blocks_x16(st, q, tail_len / 64);
    for (int l = 0; l < 16; l++)
        for (int w = 0; w < 8; w++) lt_store_be32(out[l] + 4 * w, st[w][l]);
}

/* Sixteen lanes where they were measured faster than the four SHA-NI streams: Intel cores with
 * AVX-512 (BW for the byte shuffle). Not AMD's: Zen 4 runs 512-bit operations in two halves and was
 * not measured against its SHA-NI (ADR 0008: four streams at 14.9 ns per 48-byte record on Zen 3). */
static int x16_runs(void) { /* the CPU (and the OS, which saves zmm state) can run the lanes */
    static int runs = -1;
    if (runs < 0) {
        __builtin_cpu_init();
        runs = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    }
    return runs;
}
static int x16_usable(void) { return x16_runs() && __builtin_cpu_is("intel"); }
#endif

/* Leaf lanes forced by LEDGERTOOL_MERKLE_LANES (read once, at first use) or lt_merkle_lanes_force;
 * 0: the default. */
static int forced_lanes;
static pthread_once_t lanes_once = PTHREAD_ONCE_INIT;

static int lanes_set(int lanes) {
#if LT_X86_PATHS
    if (lanes == 16 && !x16_runs()) return LT_ERR_ARG;
    if (lanes != 0 && lanes != 1 && lanes != 4 && lanes != 16) return LT_ERR_ARG;
    if (lanes == 4 && !lt_cpu_has_sha_ni()) return LT_ERR_ARG; /* the streams are SHA-NI's */
#else
    if (lanes != 0 && lanes != 1) return LT_ERR_ARG;
#endif
    forced_lanes = lanes;
    return LT_OK;
}

static void lanes_from_env(void) {
    const char *e = getenv("LEDGERTOOL_MERKLE_LANES");
    if (e && (!strcmp(e, "1") || !strcmp(e, "4") || !strcmp(e, "16")))
        (void)lanes_set(atoi(e)); /* a count this CPU cannot run is not taken */
}

int lt_merkle_lanes(void) {
    pthread_once(&lanes_once, lanes_from_env);
#if LT_X86_PATHS
    if (strcmp(lt_cpu_path(LT_ALG_HMAC_SHA256_128), "sha-ni") == 0) {
        if (forced_lanes) return forced_lanes;
        return x16_usable() ? 16 : 4;
    }
    /* the portable path: the lanes where there is no SHA-NI to run (Skylake-SP, Cascade Lake);
     * a CPU that has SHA-NI runs this path only when told to, and then hashes one at a time */
    if (forced_lanes) return forced_lanes == 16 ? 16 : 1;
    return x16_runs() && !lt_cpu_has_sha_ni() ? 16 : 1;
#else
    return 1;
#endif
}

int lt_merkle_lanes_force(int lanes) {
    /* the variable first: read later, at first use, it would replace the count forced here */
    pthread_once(&lanes_once, lanes_from_env);
    return lanes_set(lanes);
}

/* BLAKE3 entries (ADR 0013): the entries of up to B3_GROUP blocks at once through the BLAKE3 path's
 * lanes (the chunks of all of them side by side: a 16 KiB block is 16 chunks), unkeyed (the IV as
 * key, no KEYED_HASH flag), then the RFC 9162 leaf over each 32-byte entry, one compression. */
#define B3_GROUP 32
static int blake3_leaves(sha256_blocks_fn blocks, const uint8_t *records, size_t total,
                         size_t leaf_bytes, uint8_t *out) {
    static const uint32_t iv[8] = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                                   0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};
    uint8_t key[32];
    for (int i = 0; i < 8; i++) lt_store_le32(key + 4 * i, iv[i]);
    lt_dctx c;
    if (lt_dctx_init(&c, LT_ALG_BLAKE3_KEYED_256, key) != LT_OK) return LT_ERR_ARG;
    c.u.b3.mode = 0;
    const uint8_t *msgs[B3_GROUP];
    uint32_t lens[B3_GROUP];
    uint8_t entries[B3_GROUP][32];
    for (size_t off = 0; off < total;) {
        size_t n = 0;
        for (; n < B3_GROUP && off < total; n++) {
            size_t len = total - off < leaf_bytes ? total - off : leaf_bytes;
            msgs[n] = records + off;
            lens[n] = (uint32_t)len; /* <= 2^16 * 64, or one window record */
            off += len;
        }
        lt_dctx_run_many(&c, msgs, lens, n, entries[0], 32);
        for (size_t i = 0; i < n; i++, out += 32) sha256_leaf(blocks, entries[i], 32, out);
    }
    return LT_OK;
}

int lt_merkle_leaves(const uint8_t *records, size_t record_size, size_t count, size_t leaf_spec,
                     uint8_t *out, size_t out_len) {
    const int b3 = (leaf_spec & LT_LEAF_BLAKE3) != 0;
    const size_t leaf_records = leaf_spec & ~(size_t)LT_LEAF_BLAKE3;
    if (!lt_segment_record_ok(record_size, leaf_records) || !leaf_records ||
        leaf_records > LT_MERKLE_MAX_LEAF_RECORDS || (leaf_records & (leaf_records - 1)) || (count && !records) ||
        !out)
        return LT_ERR_ARG;
    size_t total, leaves = count / leaf_records + (count % leaf_records != 0);
    if (__builtin_mul_overflow(record_size, count, &total) || leaves > out_len / 32) return LT_ERR_ARG;
    const size_t leaf_bytes = record_size * leaf_records; /* <= 64 * 2^16, or one window record */
    sha256_blocks_fn blocks = sha256_blocks_portable;
    size_t off = 0;
#if LT_X86_PATHS
    if (strcmp(lt_cpu_path(LT_ALG_HMAC_SHA256_128), "sha-ni") == 0) blocks = sha256_blocks_shani;
#endif
    if (b3) return blake3_leaves(blocks, records, total, leaf_bytes, out);
#if LT_X86_PATHS
    const int lanes = lt_merkle_lanes();
    if (lanes == 16) {
        for (size_t groups = count / leaf_records / 16; groups; groups--, off += 16 * leaf_bytes, out += 512) {
            const uint8_t *rec[16];
            uint8_t *dst[16];
            for (int l = 0; l < 16; l++) rec[l] = records + off + l * leaf_bytes, dst[l] = out + 32 * l;
            leaves_x16(rec, leaf_bytes, dst);
        }
    }
    if (lanes >= 4 && blocks == sha256_blocks_shani) {
        for (size_t groups = (count - off / record_size) / leaf_records / 4; groups; groups--, off += 4 * leaf_bytes, out += 128) {
            const uint8_t *const rec[4] = {records + off, records + off + leaf_bytes, records + off + 2 * leaf_bytes,
                                           records + off + 3 * leaf_bytes};
            uint8_t *const dst[4] = {out, out + 32, out + 64, out + 96};
            /* the next group's bytes: the records are usually a copy just made, out of L2 by now */
            const uint8_t *next = records + off + 4 * leaf_bytes, *end = records + total;
            leaves_x4(rec, leaf_bytes, dst, next, (size_t)(end - next) < 4 * leaf_bytes ? end : next + 4 * leaf_bytes);
        }
    }
#endif
    for (; off < total; off += leaf_bytes, out += 32) {
        size_t len = total - off < leaf_bytes ? total - off : leaf_bytes;
        sha256_leaf(blocks, records + off, len, out);
    }
    return LT_OK;
}

/* RFC 9162 s2.1.1 tree hash over n >= 1 leaf hashes: each level pairs nodes left to right,
 * SHA-256(0x01 || left || right), and an odd last node moves up unchanged, which is the same tree as
 * the RFC's split at the largest power of two below n. Works in place in a copy of the level (one
 * allocation); for a 1 M-record segment that is 15,624 node hashes without a Python call each. */
int lt_merkle_root(const uint8_t *leaf_hashes, size_t n, uint8_t out[32]) {
    if (!n || !leaf_hashes || !out || n > SIZE_MAX / 32) return LT_ERR_ARG;
    sha256_blocks_fn blocks = sha256_blocks_portable;
#if LT_X86_PATHS
    if (strcmp(lt_cpu_path(LT_ALG_HMAC_SHA256_128), "sha-ni") == 0) blocks = sha256_blocks_shani;
#endif
    uint8_t *level = malloc(n * 32);
    if (!level) return LT_ERR_NOMEM;
    memcpy(level, leaf_hashes, n * 32);
    uint8_t node[65];
    node[0] = 0x01;
    while (n > 1) {
        size_t m = 0;
        for (size_t i = 0; i + 1 < n; i += 2, m++) {
            memcpy(node + 1, level + 32 * i, 64);
            uint32_t st[8];
            memcpy(st, SHA256_H0, sizeof st);
            sha256_finish(blocks, st, 0, node, sizeof node, level + 32 * m);
        }
        if (n & 1) {  /* the odd last node moves up a level */
            memmove(level + 32 * m, level + 32 * (n - 1), 32);
            m++;
        }
        n = m;
    }
    memcpy(out, level, 32);
    free(level);
    return LT_OK;
}
