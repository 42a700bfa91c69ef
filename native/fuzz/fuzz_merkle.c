/*
 * libFuzzer harness: the Merkle functions (lt_merkle_leaves, lt_merkle_root in
 * native/src/digest_hmac.c; RFC 9162 s2.1.1), differentially against a plain reference in this
 * file: a byte-at-a-time FIPS 180-4 SHA-256 and the RFC's recursive tree definition (split at the
 * largest power of two below n), which shares no code with the native iterative pairing.
 *
 * Input: byte 0 picks the record size (48, 64, or one of several invalid sizes), byte 1 the leaf
 * size (2^0..2^17, or 0, 3, 96: invalid ones), byte 2 the output capacity (exact, or one leaf
 * short), byte 3 the CPU path (best or portable); the rest is the records. The output buffer is
 * malloc'd at exactly the capacity passed, so ASan sees any write past it.
 *
 * Checks: valid arguments give LT_OK and the reference leaves, and lt_merkle_root over them gives
 * the reference root; every invalid argument (record size, leaf size, capacity, a count whose byte
 * size overflows, an empty tree for the root) gives LT_ERR_ARG and writes nothing.
 */
#include "fuzz_common.h"

/* ---- reference SHA-256 (FIPS 180-4), deliberately simple ---- */
typedef struct {
    uint32_t h[8];
    uint8_t buf[64];
    size_t n;
    uint64_t bits;
} ref_sha;

static const uint32_t RK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t rr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void ref_block(ref_sha *s) {
    uint32_t w[64], v[8];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)s->buf[4 * t] << 24 | (uint32_t)s->buf[4 * t + 1] << 16 | (uint32_t)s->buf[4 * t + 2] << 8 |
               s->buf[4 * t + 3];
    for (int t = 16; t < 64; t++)
        w[t] = (rr(w[t - 2], 17) ^ rr(w[t - 2], 19) ^ (w[t - 2] >> 10)) + w[t - 7] +
               (rr(w[t - 15], 7) ^ rr(w[t - 15], 18) ^ (w[t - 15] >> 3)) + w[t - 16];
    memcpy(v, s->h, sizeof v);
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = v[7] + (rr(v[4], 6) ^ rr(v[4], 11) ^ rr(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) + RK[t] + w[t];
        uint32_t t2 = (rr(v[0], 2) ^ rr(v[0], 13) ^ rr(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

static void ref_init(ref_sha *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->n = 0;
    s->bits = 0;
}

static void ref_update(ref_sha *s, const uint8_t *p, size_t len) {
    for (size_t i = 0; i < len; i++) {
        s->buf[s->n++] = p[i];
        s->bits += 8;
        if (s->n == 64) {
            ref_block(s);
            s->n = 0;
        }
    }
}

static void ref_final(ref_sha *s, uint8_t out[32]) {
    uint64_t bits = s->bits;
    uint8_t pad = 0x80, zero = 0, len[8];
    ref_update(s, &pad, 1);
    while (s->n != 56) ref_update(s, &zero, 1);
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    ref_update(s, len, 8);
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++) out[4 * i + k] = (uint8_t)(s->h[i] >> (24 - 8 * k));
}

/* RFC 9162 s2.1.1: MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])), k the largest power of
 * two below n; the leaves' hashes are given. */
static void ref_root(const uint8_t *leaves, size_t n, uint8_t out[32]) {
    if (n == 1) {
        memcpy(out, leaves, 32);
        return;
    }
    size_t k = 1;
    while (k * 2 < n) k *= 2;
    uint8_t node[65];
    node[0] = 0x01;
    ref_root(leaves, k, node + 1);
    ref_root(leaves + 32 * k, n - k, node + 33);
    ref_sha s;
    ref_init(&s);
    ref_update(&s, node, sizeof node);
    ref_final(&s, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    static const size_t sizes[] = {48, 64, 48, 64, 0, 1, 17, 32, 47, 49, 96, (size_t)1 << 62};
    static const size_t bad_leaf[] = {0, 3, 96, (size_t)1 << 60 | 1};
    const size_t record_size = sizes[data[0] % (sizeof sizes / sizeof sizes[0])];
    const size_t leaf = data[1] % 22 < 18 ? (size_t)1 << (data[1] % 22) : bad_leaf[data[1] % 22 - 18];
    const int short_out = data[2] & 1, portable = data[3] & 1;
    const uint8_t *records = data + 4;
    const size_t bytes = size - 4;
    const size_t count = record_size >= 48 && record_size <= 64 ? bytes / record_size : bytes;
    const int valid = (record_size == 48 || record_size == 64) && leaf && leaf <= LT_MERKLE_MAX_LEAF_RECORDS &&
                      !(leaf & (leaf - 1));
    const size_t nleaves = leaf ? count / leaf + (count % leaf != 0) : 0;
    const size_t cap = (nleaves - (short_out && nleaves)) * 32;

    FUZZ_CHECK(lt_cpu_path_force(LT_ALG_HMAC_SHA256_128, portable ? "portable" : NULL) == LT_OK, "force path");
    uint8_t *out = malloc(cap ? cap : 1);
    memset(out, 0xEE, cap ? cap : 1);
    int st = lt_merkle_leaves(records, record_size, count, leaf, out, cap);
    if (!valid || (short_out && nleaves)) {
        FUZZ_CHECK(st == LT_ERR_ARG, "record size %zu leaf %zu cap %zu (%zu leaves): status %d", record_size, leaf,
                   cap, nleaves, st);
        for (size_t i = 0; i < cap; i++) FUZZ_CHECK(out[i] == 0xEE, "refused call wrote byte %zu", i);
    } else {
        FUZZ_CHECK(st == LT_OK, "record size %zu leaf %zu count %zu: status %d", record_size, leaf, count, st);
        for (size_t i = 0; i < nleaves; i++) {
            size_t off = i * leaf * record_size, len = count * record_size - off;
            if (len > leaf * record_size) len = leaf * record_size;
            uint8_t want[32], zero = 0x00;
            ref_sha s;
            ref_init(&s);
            ref_update(&s, &zero, 1);
            ref_update(&s, records + off, len);
            ref_final(&s, want);
            FUZZ_CHECK(memcmp(out + 32 * i, want, 32) == 0, "leaf %zu of %zu (record size %zu, leaf %zu, %s path)",
                       i, nleaves, record_size, leaf, portable ? "portable" : "best");
        }
        uint8_t root[32], want[32];
        if (nleaves) {
            FUZZ_CHECK(lt_merkle_root(out, nleaves, root) == LT_OK, "root of %zu leaves", nleaves);
            ref_root(out, nleaves, want);
            FUZZ_CHECK(memcmp(root, want, 32) == 0, "root of %zu leaves differs from RFC 9162", nleaves);
        }
        FUZZ_CHECK(lt_merkle_root(out, 0, root) == LT_ERR_ARG, "root of no leaves");
    }
    /* a count whose byte size does not fit a size_t is refused before anything is read */
    FUZZ_CHECK(lt_merkle_leaves(records, 64, SIZE_MAX / 32, 1, out, cap) == LT_ERR_ARG, "overflowing count");
    FUZZ_CHECK(lt_cpu_path_force(LT_ALG_HMAC_SHA256_128, NULL) == LT_OK, "unforce");
    free(out);
    return 0;
}
