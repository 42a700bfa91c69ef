/*
 * Merkle leaf hashes and the tree hash over them (RFC 9162 s2.1.1; docs/ledger-format.md).
 *
 * Leaves: SHA-256(0x00 || block of leaf_records records). The compression function (sha256.h)
 * follows the hmac-sha256-128 path in use (so forcing that algorithm to "portable" also tests the
 * portable leaves). The 0x00 prefix shifts the records by one byte, so
 * each leaf is hashed through a 64-byte staging block except for its whole aligned middle, which
 * sha256_finish consumes in place after the first block.
 * Every size is checked before it is used: ledger.json is unsigned, and a leaf_records of 2^60 + 1
 * once wrapped record_size * leaf_records to 48 bytes and wrote one leaf per record past `out`.
 */
#include <stdlib.h>

#include "ledgertool.h"
#include "lt_internal.h"
#include "sha256.h"

int lt_merkle_leaves(const uint8_t *records, size_t record_size, size_t count, size_t leaf_records, uint8_t *out,
                     size_t out_len) {
    if ((record_size != LT_RECORD_FIXED + 16 && record_size != LT_RECORD_FIXED + 32) || !leaf_records ||
        leaf_records > LT_MERKLE_MAX_LEAF_RECORDS || (leaf_records & (leaf_records - 1)) || (count && !records) ||
        !out)
        return LT_ERR_ARG;
    size_t total, leaves = count / leaf_records + (count % leaf_records != 0);
    if (__builtin_mul_overflow(record_size, count, &total) || leaves > out_len / 32) return LT_ERR_ARG;
    const size_t leaf_bytes = record_size * leaf_records; /* <= 64 * 2^16: no overflow */
    sha256_blocks_fn blocks = sha256_blocks_portable;
#if LT_X86_PATHS
    if (strcmp(lt_cpu_path(LT_ALG_HMAC_SHA256_128), "sha-ni") == 0) blocks = sha256_blocks_shani;
#endif
    for (size_t off = 0; off < total; off += leaf_bytes, out += 32) {
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
