/*
 * Measurement driver for issue 14 (commit at birth, format v2): the cost per record of candidate
 * Merkle leaf constructions over blocks of consecutive records, of per-block MACs for authenticated
 * recovery, of writing records to storage, and of the digest stage's memory layout. Measurement
 * only: nothing here is used by ledgertool. scripts/leaf_bench.py builds it and turns its output
 * into the tables of docs/benchmarks.md ("Leaf construction and sealing costs"); build by hand:
 *
 *   gcc -O3 -std=gnu11 -pthread -Inative/include -Inative/src scripts/leaf_bench.c \
 *       (every native/src .c file but digest_hmac.c and digest_blake3.c) -o /tmp/leaf_bench
 *
 * digest_hmac.c (with the SHA-256 compression functions of sha256.h) and digest_blake3.c are compiled
 * into this file (#include below) so that their static compression functions (SHA-NI, SSE4.1 BLAKE3)
 * can be timed directly. With
 * -DLB_REF -I$B3 and $B3/blake3.c, blake3_dispatch.c, blake3_portable.c and the four x86-64_unix.S files
 * (the official BLAKE3 C/asm, e.g. from Debian's librust-blake3-dev, c/ directory) the reference
 * implementation is timed too.
 *
 * Modes (one line of output per measurement, `key=value` fields):
 *   leaf_bench time RSIZE LEAF NREC REPS CAND...   best / median ns per record of each candidate,
 *                                                  candidates interleaved in every round
 *   leaf_bench once RSIZE LEAF NREC CAND           one run of CAND inside lb_once (callgrind:
 *                                                  --toggle-collect=lb_once); SHA-256 is forced to
 *                                                  the portable path (valgrind has no SHA-NI)
 *   leaf_bench check                               every candidate against its reference
 *   leaf_bench io DIR RSIZE NREC BATCH REPS        segment writes: fresh / fallocate / reused file,
 *                                                  mmap, anonymous buffers; wall, user, system
 *   leaf_bench layout PATH MSG STRIDE BUF OUT N REPS TOUCH   siphash-1-3-128 batches laid out like the
 *                                                  engine's (see lb_layout)
 *   leaf_bench list                                the candidate names
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "digest_hmac.c"
#include "digest_blake3.c"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef LB_REF
#include "blake3.h"
#endif

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "leaf_bench: %s\n", what);
    exit(2);
}

/* ---------------------------------------------------------------------------------------------
 * SHA-256 leaves of any block length (lt_merkle_leaves takes 48- or 64-byte records only; the
 * partial-record candidates hash 24- to 56-byte slices): RFC 9162 leaf SHA-256(0x00 || block).
 */
#define sha_leaf1 sha256_leaf /* native/src/sha256.h: the leaf the engine computes */

static void sha_leaves(sha256_blocks_fn blocks, const uint8_t *rec, size_t total, size_t leaf_bytes, uint8_t *out) {
    for (size_t off = 0; off < total; off += leaf_bytes, out += 32)
        sha_leaf1(blocks, rec + off, total - off < leaf_bytes ? total - off : leaf_bytes, out);
}

#if LT_X86_PATHS
/* N independent SHA-256 streams through SHA-NI at once: SHA256RNDS2 has a latency of several
 * cycles and a shorter issue interval, so one stream leaves the unit idle between dependent rounds.
 * Every stream takes n blocks. Same arithmetic as sha256_blocks_shani (sha256.h), N times. */
__attribute__((target("sha,sse4.1,ssse3"))) static inline __attribute__((always_inline)) void blocks_shani_n(uint32_t *const *st, const uint8_t *const *pp,
                                                                 size_t n, const int N) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    __m128i abef[4], cdgh[4], save[4][2], m[4][4];
    const uint8_t *p[4];
    for (int s = 0; s < N; s++) {
        __m128i dcba = _mm_loadu_si128((const __m128i *)st[s]), hgfe = _mm_loadu_si128((const __m128i *)(st[s] + 4));
        __m128i badc = _mm_shuffle_epi32(dcba, 0xB1), efgh = _mm_shuffle_epi32(hgfe, 0x1B);
        abef[s] = _mm_alignr_epi8(badc, efgh, 8);
        cdgh[s] = _mm_blend_epi16(efgh, badc, 0xF0);
        p[s] = pp[s];
    }
    for (; n; n--) {
        for (int s = 0; s < N; s++) save[s][0] = abef[s], save[s][1] = cdgh[s];
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
            __m128i k = _mm_loadu_si128((const __m128i *)(SHA256_K + 4 * g));
#pragma GCC unroll 4
            for (int s = 0; s < N; s++) {
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
        for (int s = 0; s < N; s++) {
            abef[s] = _mm_add_epi32(abef[s], save[s][0]);
            cdgh[s] = _mm_add_epi32(cdgh[s], save[s][1]);
            p[s] += 64;
        }
    }
    for (int s = 0; s < N; s++) {
        __m128i feba = _mm_shuffle_epi32(abef[s], 0x1B), ghcd = _mm_shuffle_epi32(cdgh[s], 0xB1);
        _mm_storeu_si128((__m128i *)st[s], _mm_blend_epi16(feba, ghcd, 0xF0));
        _mm_storeu_si128((__m128i *)(st[s] + 4), _mm_alignr_epi8(ghcd, feba, 8));
    }
}
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_shani_x2(uint32_t *const *st, const uint8_t *const *p,
                                                                        size_t n) { blocks_shani_n(st, p, n, 2); }
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_shani_x3(uint32_t *const *st, const uint8_t *const *p,
                                                                        size_t n) { blocks_shani_n(st, p, n, 3); }
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_shani_x4(uint32_t *const *st, const uint8_t *const *p,
                                                                        size_t n) { blocks_shani_n(st, p, n, 4); }
typedef void (*blocks_n_fn)(uint32_t *const *st, const uint8_t *const *p, size_t n);

/* Leaves N at a time: each has leaf_bytes >= 63 bytes, so it is a staged first block (0x00 and 63
 * record bytes), whole blocks in place, and a padded tail of the same shape for all N. */
static void sha_leaves_n(blocks_n_fn fn, int N, const uint8_t *rec, size_t total, size_t leaf_bytes, uint8_t *out) {
    size_t full = total / leaf_bytes, i = 0;
    if (leaf_bytes >= 63) {
        size_t rest = leaf_bytes - 63, whole = rest / 64, rem = rest - whole * 64;
        size_t tail_len = rem + 9 <= 64 ? 64 : 128;
        for (; i + N <= full; i += N) {
            uint32_t sv[4][8], *st[4];
            uint8_t first[4][64], tail[4][128];
            const uint8_t *p[4], *q[4];
            for (int s = 0; s < N; s++) {
                p[s] = rec + (i + s) * leaf_bytes;
                st[s] = sv[s];
                memcpy(sv[s], SHA256_H0, 32);
                first[s][0] = 0x00;
                memcpy(first[s] + 1, p[s], 63);
                q[s] = first[s];
            }
            fn(st, q, 1);
            for (int s = 0; s < N; s++) q[s] = p[s] + 63;
            if (whole) fn(st, q, whole);
            for (int s = 0; s < N; s++) {
                memset(tail[s], 0, sizeof tail[s]);
                memcpy(tail[s], p[s] + 63 + whole * 64, rem);
                tail[s][rem] = 0x80;
                lt_store_be64(tail[s] + tail_len - 8, (uint64_t)(leaf_bytes + 1) * 8);
                q[s] = tail[s];
            }
            fn(st, q, tail_len / 64);
            for (int s = 0; s < N; s++)
                for (int w = 0; w < 8; w++) lt_store_be32(out + 32 * (i + s) + 4 * w, sv[s][w]);
        }
    }
    for (size_t off = i * leaf_bytes; off < total; off += leaf_bytes, i++)
        sha_leaf1(sha256_blocks_shani, rec + off, total - off < leaf_bytes ? total - off : leaf_bytes, out + 32 * i);
}
static void sha_leaves_x2(const uint8_t *rec, size_t total, size_t leaf_bytes, uint8_t *out) {
    sha_leaves_n(blocks_shani_x2, 2, rec, total, leaf_bytes, out);
}
#endif

/* ---------------------------------------------------------------------------------------------
 * One segment of records and everything the candidates need, set up outside the timed region.
 */
typedef struct {
    uint8_t *rec;            /* n records of rsize bytes */
    size_t rsize, n, leaf, leaves, ds;
    const uint8_t **msgs;    /* leaf block table for the multi-buffer calls */
    uint32_t *lens;
    uint8_t *stage;          /* gathered partial records */
    size_t stage_rsize;
    const uint8_t **pmsgs;
    uint32_t *plens;
    uint8_t *entries, *hashes, *macs, root[32], tag[32];
    lt_dctx b3pub;           /* BLAKE3 lanes with key = IV: the cost of the unkeyed hash (flags differ only) */
    lt_dctx b3mac, sip, gmac, hmacblk, hmac;
    uint32_t mackey[8];
    sha256_blocks_fn blocks; /* SHA-NI, or portable under valgrind */
} seg;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Records as capture writes them: 64-byte frames (60 captured) every 6.72 ns, random digests. */
static void fill_records(uint8_t *rec, size_t rsize, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t *r = rec + i * rsize;
        lt_store_le64(r, i);
        lt_store_le64(r + 8, 1767225600000000000ull + i * 6720 / 1000);
        lt_store_le32(r + 16, 64);
        lt_store_le32(r + 20, 60);
        lt_store_le16(r + 24, 0);
        lt_store_le16(r + 26, 1);
        lt_store_le32(r + 28, 0);
        for (size_t k = 32; k < rsize; k += 8) lt_store_le64(r + k, rng());
    }
}

static void table(const uint8_t *base, size_t total, size_t leaf_bytes, const uint8_t **msgs, uint32_t *lens) {
    size_t i = 0;
    for (size_t off = 0; off < total; off += leaf_bytes, i++) {
        msgs[i] = base + off;
        lens[i] = (uint32_t)(total - off < leaf_bytes ? total - off : leaf_bytes);
    }
}

static void dctx(lt_dctx *c, int alg, const char *path, const uint8_t *key) {
    if (lt_cpu_path_force(alg, path) != LT_OK) {
        fprintf(stderr, "leaf_bench: path %s of algorithm %d not available\n", path, alg);
        exit(2);
    }
    if (lt_dctx_init(c, alg, key) != LT_OK) die("lt_dctx_init");
}

static void seg_init(seg *s, size_t rsize, size_t leaf, size_t n, int under_valgrind) {
    memset(s, 0, sizeof *s);
    s->rsize = rsize;
    s->ds = rsize - LT_RECORD_FIXED;
    s->leaf = leaf;
    s->n = n;
    s->leaves = n / leaf + (n % leaf != 0);
    s->rec = aligned_alloc(64, (n * rsize + 63) / 64 * 64);
    s->stage = aligned_alloc(64, (n * rsize + 63) / 64 * 64);
    s->msgs = malloc(s->leaves * sizeof *s->msgs);
    s->pmsgs = malloc(s->leaves * sizeof *s->pmsgs);
    s->lens = malloc(s->leaves * sizeof *s->lens);
    s->plens = malloc(s->leaves * sizeof *s->plens);
    s->entries = malloc(s->leaves * 32);
    s->hashes = malloc(s->leaves * 32);
    s->macs = malloc(s->leaves * 32);
    if (!s->rec || !s->stage || !s->msgs || !s->pmsgs || !s->lens || !s->plens || !s->entries || !s->hashes ||
        !s->macs)
        die("out of memory");
    fill_records(s->rec, rsize, n);
    memset(s->stage, 0, n * rsize);
    table(s->rec, n * rsize, leaf * rsize, s->msgs, s->lens);
    uint8_t iv[32], key[32];
    for (int i = 0; i < 8; i++) lt_store_le32(iv + 4 * i, IV[i]);
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 7 + 1);
    s->blocks = sha256_blocks_portable;
#if LT_X86_PATHS
    if (!under_valgrind && lt_cpu_has_sha_ni()) s->blocks = sha256_blocks_shani;
#endif
    /* the keyed paths; under valgrind SHA-NI and AVX-512 are not decoded */
    dctx(&s->hmac, LT_ALG_HMAC_SHA256_128, s->blocks == sha256_blocks_portable ? "portable" : "sha-ni", key);
    s->hmac.out_len = 32;
    s->hmacblk = s->hmac;
    if (!lt_cpu_has_avx2()) die("this driver measures the AVX2 paths: no AVX2 here");
    dctx(&s->b3pub, LT_ALG_BLAKE3_KEYED_256, "avx2-mb", iv);
    dctx(&s->b3mac, LT_ALG_BLAKE3_KEYED_256, "avx2-mb", key);
    dctx(&s->sip, LT_ALG_SIPHASH_1_3_128, "avx2-mb", key);
    dctx(&s->gmac, LT_ALG_AES_128_GMAC, "aesni-pclmul", key);
    for (int i = 0; i < 8; i++) s->mackey[i] = lt_load_le32(key + 4 * i);
}

/* ---- the candidates ---- */

/* partial records: which bytes of each record are hashed */
enum { ALL, DIGEST_SEQ, NO_SEQ };

static void gather(seg *s, int part) {
    const uint8_t *r = s->rec;
    uint8_t *o = s->stage;
    if (part == DIGEST_SEQ) {  /* seq (8) and the digest: 24 or 40 bytes */
        for (size_t i = 0; i < s->n; i++, r += s->rsize, o += 8 + s->ds) {
            memcpy(o, r, 8);
            memcpy(o + 8, r + LT_RECORD_FIXED, s->ds);
        }
        s->stage_rsize = 8 + s->ds;
    } else {  /* everything but seq, which position implies: 40 or 56 bytes */
        for (size_t i = 0; i < s->n; i++, r += s->rsize, o += s->rsize - 8) memcpy(o, r + 8, s->rsize - 8);
        s->stage_rsize = s->rsize - 8;
    }
    table(s->stage, s->n * s->stage_rsize, s->leaf * s->stage_rsize, s->pmsgs, s->plens);
}

static void c_sha256_ni(seg *s) {
    if (s->blocks == sha256_blocks_portable) {  /* under valgrind: the same construction, portable C */
        sha_leaves(s->blocks, s->rec, s->n * s->rsize, s->leaf * s->rsize, s->hashes);
        return;
    }
    if (lt_merkle_leaves(s->rec, s->rsize, s->n, s->leaf, s->hashes, s->leaves * 32) != LT_OK)
        die("lt_merkle_leaves");
}
#if LT_X86_PATHS
static void c_sha256_ni_x2(seg *s) { sha_leaves_x2(s->rec, s->n * s->rsize, s->leaf * s->rsize, s->hashes); }
static void c_sha256_ni_x3(seg *s) {
    sha_leaves_n(blocks_shani_x3, 3, s->rec, s->n * s->rsize, s->leaf * s->rsize, s->hashes);
}
static void c_sha256_ni_x4(seg *s) {
    sha_leaves_n(blocks_shani_x4, 4, s->rec, s->n * s->rsize, s->leaf * s->rsize, s->hashes);
}
#endif
static void c_blake3_mb(seg *s) { lt_dctx_run_many(&s->b3pub, s->msgs, s->lens, s->leaves, s->entries, 32); }
static void c_blake3_1msg(seg *s) {
    for (size_t i = 0; i < s->leaves; i++)
        blake3_keyed(compress_sse41, s->b3pub.u.b3.key, s->msgs[i], s->lens[i], s->entries + 32 * i, 32);
}
#ifdef LB_REF
static void c_blake3_ref(seg *s) {
    for (size_t i = 0; i < s->leaves; i++) {
        blake3_hasher h;
        blake3_hasher_init(&h);
        blake3_hasher_update(&h, s->msgs[i], s->lens[i]);
        blake3_hasher_finalize(&h, s->entries + 32 * i, 32);
    }
}
/* not a leaf construction: the whole segment as one message, the official code's lanes full (its ceiling) */
static void c_blake3_ref_stream(seg *s) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, s->rec, s->n * s->rsize);
    blake3_hasher_finalize(&h, s->root, 32);
}
#endif
static void c_gather_dseq(seg *s) { gather(s, DIGEST_SEQ); }
static void c_gather_noseq(seg *s) { gather(s, NO_SEQ); }
static void sha_stage(seg *s) {
#if LT_X86_PATHS
    if (s->blocks != sha256_blocks_portable) {
        sha_leaves_n(blocks_shani_x4, 4, s->stage, s->n * s->stage_rsize, s->leaf * s->stage_rsize, s->hashes);
        return;
    }
#endif
    sha_leaves(s->blocks, s->stage, s->n * s->stage_rsize, s->leaf * s->stage_rsize, s->hashes);
}
static void c_sha_dseq(seg *s) { gather(s, DIGEST_SEQ); sha_stage(s); }
static void c_sha_noseq(seg *s) { gather(s, NO_SEQ); sha_stage(s); }
static void c_b3_dseq(seg *s) {
    gather(s, DIGEST_SEQ);
    lt_dctx_run_many(&s->b3pub, s->pmsgs, s->plens, s->leaves, s->entries, 32);
}
static void c_b3_noseq(seg *s) {
    gather(s, NO_SEQ);
    lt_dctx_run_many(&s->b3pub, s->pmsgs, s->plens, s->leaves, s->entries, 32);
}

/* RFC 9162 leaf hash of a 32-byte entry: SHA-256(0x00 || entry), one compression */
static void c_entry_leafhash(seg *s) {
    uint8_t m[33];
    m[0] = 0x00;
    for (size_t i = 0; i < s->leaves; i++) {
        uint32_t st[8];
        memcpy(st, SHA256_H0, 32);
        memcpy(m + 1, s->entries + 32 * i, 32);
        sha256_finish(s->blocks, st, 0, m, 33, s->hashes + 32 * i);
    }
}

/* the RFC 9162 tree above the leaf hashes (one node per leaf: 65 bytes, two compressions) */
static void c_tree(seg *s) {
    if (lt_merkle_root(s->hashes, s->leaves, s->root) != LT_OK) die("lt_merkle_root");
}

/* Device MAC chained across blocks, over the block's 32-byte commitment (leaf hash or entry):
 * tag_i = MAC_K(tag_{i-1} || u64le(i) || h_i), 72 bytes. Cost per block, not per byte. */
static void c_mac_b3_entry(seg *s) {
    uint8_t m[72];
    memset(s->tag, 0, 32);
    for (size_t i = 0; i < s->leaves; i++) {
        memcpy(m, s->tag, 32);
        lt_store_le64(m + 32, i);
        memcpy(m + 40, s->hashes + 32 * i, 32);
        blake3_keyed(compress_sse41, s->mackey, m, 72, s->tag, 32);
        memcpy(s->macs + 32 * i, s->tag, 32);
    }
}
static void c_mac_hmac_entry(seg *s) {
    uint8_t m[72];
    memset(s->tag, 0, 32);
    for (size_t i = 0; i < s->leaves; i++) {
        memcpy(m, s->tag, 32);
        lt_store_le64(m + 32, i);
        memcpy(m + 40, s->hashes + 32 * i, 32);
        hmac_digest_with(s->blocks, &s->hmac, m, 72, s->tag);
        memcpy(s->macs + 32 * i, s->tag, 32);
    }
}
/* Device MAC over the raw block (a second pass over every record byte); chaining the block tags
 * would add one short MAC per block as above. */
static void c_mac_b3_block(seg *s) { lt_dctx_run_many(&s->b3mac, s->msgs, s->lens, s->leaves, s->macs, 32); }
static void c_mac_sip_block(seg *s) { lt_dctx_run_many(&s->sip, s->msgs, s->lens, s->leaves, s->macs, 32); }
static void c_mac_gmac_block(seg *s) { lt_dctx_run_many(&s->gmac, s->msgs, s->lens, s->leaves, s->macs, 32); }
static void c_mac_hmac_block(seg *s) {
    for (size_t i = 0; i < s->leaves; i++) hmac_digest_with(s->blocks, &s->hmacblk, s->msgs[i], s->lens[i], s->macs + 32 * i);
}

/* whole pipelines: what sealing (and, without the MAC, verification) computes per segment */
static void c_seal_v1(seg *s) { c_sha256_ni(s); c_tree(s); c_mac_hmac_entry(s); }
#if LT_X86_PATHS
static void c_seal_v1x4(seg *s) { c_sha256_ni_x4(s); c_tree(s); c_mac_hmac_entry(s); }
static void c_verify_v1x4(seg *s) { c_sha256_ni_x4(s); c_tree(s); }
#endif
static void c_seal_b3(seg *s) { c_blake3_mb(s); c_entry_leafhash(s); c_tree(s); c_mac_hmac_entry(s); }
static void c_verify_v1(seg *s) { c_sha256_ni(s); c_tree(s); }
static void c_verify_b3(seg *s) { c_blake3_mb(s); c_entry_leafhash(s); c_tree(s); }

typedef struct {
    const char *name;
    void (*fn)(seg *);
    int shani;  /* needs SHA-NI (not under valgrind) */
} cand;

static const cand CANDS[] = {
    {"sha256-ni", c_sha256_ni, 0},  /* portable under valgrind */
#if LT_X86_PATHS
    {"sha256-ni-x2", c_sha256_ni_x2, 1},
    {"sha256-ni-x3", c_sha256_ni_x3, 1},
    {"sha256-ni-x4", c_sha256_ni_x4, 1},
#endif
    {"blake3-avx2-mb", c_blake3_mb, 0},
    {"blake3-sse41-1msg", c_blake3_1msg, 0},
#ifdef LB_REF
    {"blake3-ref-c", c_blake3_ref, 0},
    {"blake3-ref-c-stream", c_blake3_ref_stream, 0},
#endif
    {"gather-digest+seq", c_gather_dseq, 0},
    {"gather-no-seq", c_gather_noseq, 0},
    {"sha256-ni-x4:digest+seq", c_sha_dseq, 1},
    {"sha256-ni-x4:no-seq", c_sha_noseq, 1},
    {"blake3-avx2-mb:digest+seq", c_b3_dseq, 0},
    {"blake3-avx2-mb:no-seq", c_b3_noseq, 0},
    {"entry-leafhash", c_entry_leafhash, 0},
    {"tree", c_tree, 0},
    {"mac-blake3-entry", c_mac_b3_entry, 0},
    {"mac-hmac-entry", c_mac_hmac_entry, 0},
    {"mac-blake3-block", c_mac_b3_block, 0},
    {"mac-siphash13-block", c_mac_sip_block, 0},
    {"mac-gmac-block", c_mac_gmac_block, 0},
    {"mac-hmac-block", c_mac_hmac_block, 0},
    {"seal-v1", c_seal_v1, 0},
#if LT_X86_PATHS
    {"seal-v1-x4", c_seal_v1x4, 1},
    {"verify-v1-x4", c_verify_v1x4, 1},
#endif
    {"seal-b3", c_seal_b3, 0},
    {"verify-v1", c_verify_v1, 0},
    {"verify-b3", c_verify_b3, 0},
    {NULL, NULL, 0},
};

static const cand *find(const char *name) {
    for (const cand *c = CANDS; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    fprintf(stderr, "leaf_bench: unknown candidate %s (leaf_bench list)\n", name);
    exit(2);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int mode_time(int argc, char **argv) {
    if (argc < 7) die("usage: time RSIZE LEAF NREC REPS CAND...");
    size_t rsize = strtoul(argv[2], NULL, 10), leaf = strtoul(argv[3], NULL, 10), n = strtoul(argv[4], NULL, 10);
    int reps = atoi(argv[5]), nc = argc - 6;
    seg s;
    seg_init(&s, rsize, leaf, n, 0);
    const cand **cs = malloc(nc * sizeof *cs);
    uint64_t *t = malloc((size_t)nc * reps * sizeof *t);
    for (int i = 0; i < nc; i++) {
        cs[i] = find(argv[6 + i]);
        if (cs[i]->shani && s.blocks == sha256_blocks_portable) die("no SHA-NI on this CPU");
    }
    /* warm-up, so the first candidate does not pay the first touch of the buffers */
    for (int i = 0; i < nc; i++) cs[i]->fn(&s);
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nc; i++) {
            uint64_t t0 = now_ns();
            cs[i]->fn(&s);
            t[(size_t)i * reps + r] = now_ns() - t0;
        }
    for (int i = 0; i < nc; i++) {
        qsort(t + (size_t)i * reps, reps, sizeof *t, cmp_u64);
        printf("cand=%s rsize=%zu leaf=%zu nrec=%zu best_ns=%.3f median_ns=%.3f\n", cs[i]->name, rsize, leaf, n,
               (double)t[(size_t)i * reps] / n, (double)t[(size_t)i * reps + reps / 2] / n);
    }
    return 0;
}

__attribute__((noinline)) void lb_once(const cand *c, seg *s);
__attribute__((noinline)) void lb_once(const cand *c, seg *s) { c->fn(s); }

static int mode_once(int argc, char **argv) {
    if (argc < 6) die("usage: once RSIZE LEAF NREC CAND");
    seg s;
    lt_cpu_path_force(LT_ALG_HMAC_SHA256_128, "portable");
    seg_init(&s, strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10), 1);
    const cand *c = find(argv[5]);
    if (c->shani) die("candidate needs SHA-NI, which valgrind does not decode");
    c->fn(&s);  /* warm: the first touch is not counted either */
    lb_once(c, &s);
    printf("cand=%s nrec=%zu done\n", c->name, s.n);
    return 0;
}

/* Every candidate against its reference: sha256-ni-x2 and the portable leaves equal
 * lt_merkle_leaves; the BLAKE3 lanes equal the single-message code (and the official C with
 * LB_REF, keyed mode); partial candidates equal their single-stream forms. */
static int mode_check(void) {
    int bad = 0;
    size_t sizes[2] = {48, 64}, leafs[3] = {64, 256, 4096};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++) {
            size_t n = leafs[b] * 5 + 17;  /* a short last leaf, an odd leaf count */
            seg s;
            seg_init(&s, sizes[a], leafs[b], n, 0);
            uint8_t *ref = malloc(s.leaves * 32), *got = malloc(s.leaves * 32);
            if (lt_merkle_leaves(s.rec, s.rsize, s.n, s.leaf, ref, s.leaves * 32) != LT_OK) die("leaves");
            sha_leaves(sha256_blocks_portable, s.rec, s.n * s.rsize, s.leaf * s.rsize, got);
            bad |= memcmp(ref, got, s.leaves * 32) != 0;
#if LT_X86_PATHS
            if (lt_cpu_has_sha_ni()) {
                sha_leaves_x2(s.rec, s.n * s.rsize, s.leaf * s.rsize, got);
                bad |= memcmp(ref, got, s.leaves * 32) != 0;
                c_sha256_ni_x3(&s);
                bad |= memcmp(ref, s.hashes, s.leaves * 32) != 0;
                c_sha256_ni_x4(&s);
                bad |= memcmp(ref, s.hashes, s.leaves * 32) != 0;
                gather(&s, NO_SEQ);
                sha_leaves(sha256_blocks_portable, s.stage, s.n * s.stage_rsize, s.leaf * s.stage_rsize, ref);
                sha_leaves_x2(s.stage, s.n * s.stage_rsize, s.leaf * s.stage_rsize, got);
                bad |= memcmp(ref, got, s.leaves * 32) != 0;
            }
#endif
            c_blake3_mb(&s);
            memcpy(got, s.entries, s.leaves * 32);
            c_blake3_1msg(&s);
            bad |= memcmp(got, s.entries, s.leaves * 32) != 0;
#ifdef LB_REF
            uint8_t key[32];
            for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 7 + 1);
            lt_dctx_run_many(&s.b3mac, s.msgs, s.lens, s.leaves, got, 32);
            for (size_t i = 0; i < s.leaves; i++) {
                blake3_hasher h;
                blake3_hasher_init_keyed(&h, key);
                blake3_hasher_update(&h, s.msgs[i], s.lens[i]);
                uint8_t o[32];
                blake3_hasher_finalize(&h, o, 32);
                bad |= memcmp(o, got + 32 * i, 32) != 0;
            }
#endif
            printf("check rsize=%zu leaf=%zu n=%zu %s\n", s.rsize, s.leaf, s.n, bad ? "FAIL" : "ok");
            free(ref);
            free(got);
        }
    return bad;
}

/* ---------------------------------------------------------------------------------------------
 * Storage: one segment of nrec records written batch by batch (the engine's batch buffer, reused
 * and in cache, is the source), as a fresh file, a preallocated file, a reused file, through a
 * shared mapping, and the anonymous-buffer churn of a fresh buffer per segment. Per variant: wall,
 * user and system CPU (getrusage, this thread) and minor faults, best and median of reps; the
 * kernel's writeback threads are not this thread's and are not in these figures.
 */
typedef struct {
    uint64_t wall, utime, stime, minflt;
} usage;

static usage usage_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    usage u = {now_ns(), (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000,
               (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)ru.ru_stime.tv_usec * 1000,
               (uint64_t)ru.ru_minflt};
    return u;
}

static void write_all(int fd, const uint8_t *p, size_t len, off_t off) {
    while (len) {
        ssize_t w = pwrite(fd, p, len, off);
        if (w < 0) {
            if (errno == EINTR) continue;
            die("pwrite failed");
        }
        p += w;
        len -= (size_t)w;
        off += w;
    }
}

enum { IO_FRESH, IO_FALLOC, IO_REUSED, IO_FRESH_SYNC, IO_FALLOC_SYNC, IO_REUSED_SYNC, IO_MMAP_FRESH, IO_MMAP_REUSED,
       IO_ANON_FRESH, IO_ANON_REUSED, IO_N };
static const char *const IO_NAMES[IO_N] = {
    "write-fresh", "write-fallocate", "write-reused", "write-fresh+fdatasync", "write-fallocate+fdatasync",
    "write-reused+fdatasync", "mmap-fresh", "mmap-reused", "anon-buffer-fresh", "anon-buffer-reused"};

static int mode_io(int argc, char **argv) {
    if (argc < 7) die("usage: io DIR RSIZE NREC BATCH REPS");
    const char *dir = argv[2];
    size_t rsize = strtoul(argv[3], NULL, 10), n = strtoul(argv[4], NULL, 10), batch = strtoul(argv[5], NULL, 10);
    int reps = atoi(argv[6]);
    size_t seg_bytes = n * rsize, bb = batch * rsize;
    uint8_t *src = aligned_alloc(4096, (bb + 4095) / 4096 * 4096);
    uint8_t *anon_reused = malloc(seg_bytes);
    if (!src || !anon_reused) die("out of memory");
    fill_records(src, rsize, batch);
    memset(anon_reused, 0, seg_bytes);
    char fresh[4096], reused[4096];
    snprintf(fresh, sizeof fresh, "%s/leaf_bench_fresh.seg", dir);
    snprintf(reused, sizeof reused, "%s/leaf_bench_reused.seg", dir);
    /* the reused file exists, full size, before the first round (a sealed segment's file kept for reuse) */
    int fd = open(reused, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) die("cannot create the reused file");
    for (size_t off = 0; off < seg_bytes; off += bb) write_all(fd, src, off + bb <= seg_bytes ? bb : seg_bytes - off, (off_t)off);
    fsync(fd);
    close(fd);
    usage *m = calloc((size_t)IO_N * reps, sizeof *m);
    uint64_t *unlink_ns = calloc(reps, sizeof *unlink_ns);
    for (int r = 0; r < reps; r++)
        for (int v = 0; v < IO_N; v++) {
            int reuse = v == IO_REUSED || v == IO_REUSED_SYNC || v == IO_MMAP_REUSED;
            int anon = v == IO_ANON_FRESH || v == IO_ANON_REUSED;
            if (!reuse && !anon) {  /* the previous segment's file goes first (timed apart: unlink) */
                uint64_t t0 = now_ns();
                unlink(fresh);
                if (v == IO_FRESH) unlink_ns[r] = now_ns() - t0;
            }
            usage a = usage_now();
            if (anon) {
                /* the record buffer of one segment: a new allocation (mmap'd by malloc at this size:
                 * first-touch faults, pages zeroed by the kernel, munmap) or the same one again */
                uint8_t *buf = v == IO_ANON_FRESH ? malloc(seg_bytes) : anon_reused;
                if (!buf) die("out of memory");
                for (size_t off = 0; off < seg_bytes; off += bb)
                    memcpy(buf + off, src, off + bb <= seg_bytes ? bb : seg_bytes - off);
                __asm__ volatile("" : : "r"(buf) : "memory");
                if (v == IO_ANON_FRESH) free(buf);
            } else {
                const char *path = reuse ? reused : fresh;
                fd = open(path, (reuse ? 0 : O_CREAT | O_EXCL) | O_RDWR | O_CLOEXEC, 0600);
                if (fd < 0) die("open failed");
                if (v == IO_FALLOC || v == IO_FALLOC_SYNC) {
                    int e = posix_fallocate(fd, 0, (off_t)seg_bytes);
                    if (e) die("posix_fallocate failed");
                }
                if (v == IO_MMAP_FRESH || v == IO_MMAP_REUSED) {
                    if (v == IO_MMAP_FRESH && ftruncate(fd, (off_t)seg_bytes)) die("ftruncate failed");
                    uint8_t *map = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                    if (map == MAP_FAILED) die("mmap failed");
                    for (size_t off = 0; off < seg_bytes; off += bb)
                        memcpy(map + off, src, off + bb <= seg_bytes ? bb : seg_bytes - off);
                    munmap(map, seg_bytes);
                } else {
                    for (size_t off = 0; off < seg_bytes; off += bb)
                        write_all(fd, src, off + bb <= seg_bytes ? bb : seg_bytes - off, (off_t)off);
                }
                if (v == IO_FRESH_SYNC || v == IO_FALLOC_SYNC || v == IO_REUSED_SYNC) fdatasync(fd);
                close(fd);
            }
            usage b = usage_now();
            m[(size_t)v * reps + r] = (usage){b.wall - a.wall, b.utime - a.utime, b.stime - a.stime,
                                              b.minflt - a.minflt};
        }
    unlink(fresh);
    unlink(reused);
    for (int v = 0; v < IO_N; v++) {
        uint64_t w[reps], u[reps], s[reps], f[reps];
        for (int r = 0; r < reps; r++) {
            usage x = m[(size_t)v * reps + r];
            w[r] = x.wall; u[r] = x.utime; s[r] = x.stime; f[r] = x.minflt;
        }
        qsort(w, reps, 8, cmp_u64); qsort(u, reps, 8, cmp_u64); qsort(s, reps, 8, cmp_u64); qsort(f, reps, 8, cmp_u64);
        printf("io=%s rsize=%zu nrec=%zu batch=%zu best_ns=%.3f median_ns=%.3f user_median_ns=%.3f "
               "sys_median_ns=%.3f minflt_per_4k=%.3f\n", IO_NAMES[v], rsize, n, batch, (double)w[0] / n,
               (double)w[reps / 2] / n, (double)u[reps / 2] / n, (double)s[reps / 2] / n,
               (double)f[reps / 2] / ((double)seg_bytes / 4096));
    }
    qsort(unlink_ns, reps, 8, cmp_u64);
    printf("io=unlink-previous rsize=%zu nrec=%zu best_ns=%.3f median_ns=%.3f\n", rsize, n,
           (double)unlink_ns[0] / n, (double)unlink_ns[reps / 2] / n);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The digest stage's memory layout: siphash-1-3-128 on PATH over batches of N messages of MSG
 * bytes placed STRIDE bytes apart (the engine: a 16-byte pcap record header + 60 captured bytes =
 * 76) in a buffer of BUF bytes walked batch after batch, digests written OUT bytes apart (the
 * engine: into 48-byte records; isolation: 16 or 32). TOUCH 1: before each batch's digest call,
 * one load per message and the message table are written in a separate pass (what the engine's
 * read and record stages leave in the caches); 0: the table is built once, outside the timing.
 */
static int mode_layout(int argc, char **argv) {
    if (argc < 10) die("usage: layout PATH MSG STRIDE BUF OUT N REPS TOUCH");
    const char *path = argv[2];
    size_t msg = strtoul(argv[3], NULL, 10), stride = strtoul(argv[4], NULL, 10), buf_len = strtoul(argv[5], NULL, 10);
    size_t out = strtoul(argv[6], NULL, 10), batch = strtoul(argv[7], NULL, 10);
    int reps = atoi(argv[8]), touch = atoi(argv[9]);
    if (stride < msg || buf_len < stride * 2 || out < 16) die("layout: bad sizes");
    uint8_t key[16] = {1, 2, 3};
    lt_dctx c;
    dctx(&c, LT_ALG_SIPHASH_1_3_128, path, key);
    size_t slots = buf_len / stride;  /* messages in the buffer */
    uint8_t *buf = aligned_alloc(64, (buf_len + 63) / 64 * 64);
    uint8_t *o = aligned_alloc(64, (batch * out + 63) / 64 * 64);
    const uint8_t **msgs = malloc(batch * sizeof *msgs);
    uint32_t *lens = malloc(batch * sizeof *lens);
    if (!buf || !o || !msgs || !lens) die("out of memory");
    for (size_t i = 0; i < buf_len; i++) buf[i] = (uint8_t)(i * 131 + 7);
    memset(o, 0, batch * out);
    /* a pass digests every message of the buffer once (at least 4 batches) */
    size_t per_pass = slots < 4 * batch ? 4 * batch : slots;
    uint64_t *t = malloc(reps * sizeof *t);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < batch; i++) {
        msgs[i] = buf + (i % slots) * stride;
        lens[i] = (uint32_t)msg;
    }
    for (int r = -1; r < reps; r++) {
        size_t pos = 0;
        uint64_t t0 = now_ns();
        for (size_t done = 0; done < per_pass; done += batch) {
            if (touch) {
                uint8_t acc = 0;
                for (size_t i = 0; i < batch; i++) {
                    const uint8_t *p = buf + pos * stride;
                    acc ^= p[0];
                    msgs[i] = p;
                    lens[i] = (uint32_t)msg;
                    if (++pos == slots) pos = 0;
                }
                sink ^= acc;
            }
            lt_dctx_run_many(&c, msgs, lens, batch, o, out);
        }
        uint64_t dt = now_ns() - t0;
        if (r >= 0) t[r] = dt;
    }
    qsort(t, reps, 8, cmp_u64);
    printf("layout path=%s msg=%zu stride=%zu buf=%zu out=%zu batch=%zu touch=%d best_ns=%.3f median_ns=%.3f\n", path,
           msg, stride, buf_len, out, batch, touch, (double)t[0] / per_pass, (double)t[reps / 2] / per_pass);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: leaf_bench time|once|check|io|layout|list ...");
    if (strcmp(argv[1], "time") == 0) return mode_time(argc, argv);
    if (strcmp(argv[1], "once") == 0) return mode_once(argc, argv);
    if (strcmp(argv[1], "check") == 0) return mode_check();
    if (strcmp(argv[1], "io") == 0) return mode_io(argc, argv);
    if (strcmp(argv[1], "layout") == 0) return mode_layout(argc, argv);
    if (strcmp(argv[1], "list") == 0) {
        for (const cand *c = CANDS; c->name; c++) printf("%s\n", c->name);
        return 0;
    }
    die("unknown mode");
    return 2;
}
