/*
 * libFuzzer harness: the raw record file parser (lt_rec_records, native/src/recfile.c; ledger
 * format v2 sealed segments), differentially against a plain block walk written here, and
 * lt_rec_leaves (the same walk hashing leaves in place) against lt_rec_records.
 *
 * Input: byte 0 picks the record size (48, 64, or an invalid one), byte 1 the leaf size (2^0..2^16)
 * and whether leaves are asked for, byte 2 whether the output buffer is exact (len - 256 bytes) or
 * one byte short of the records; the rest is the file (header and blocks). Buffers are malloc'd at
 * exactly the sizes passed, so ASan sees any write past them.
 *
 * Checks: an invalid record size is LT_ERR_ARG; otherwise the status, the record and block counts,
 * the error kind and offset equal the reference walk's, the records copied equal the blocks'
 * records, and the leaves equal lt_merkle_leaves over them; lt_rec_leaves (with exactly the leaves
 * buffer the records need) gives the same status, info and leaves.
 */
#include "fuzz_common.h"

static uint64_t lt_load_le64_fuzz(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

typedef struct {
    int rc, error;
    uint64_t records, blocks, offset;
} ref_result;

static ref_result ref_walk(const uint8_t *f, size_t len, size_t rs) {
    ref_result r = {LT_OK, 0, 0, 0, 0};
    if (len < 256) return (ref_result){LT_ERR_CORRUPT, LT_REC_HEADER_CUT, 0, 0, len};
    size_t pos = 256;
    while (pos != len) {
        if (pos + 4 > len) return (ref_result){LT_ERR_CORRUPT, LT_REC_TRAILING, r.records, r.blocks, pos};
        uint32_t c = (uint32_t)f[pos] | (uint32_t)f[pos + 1] << 8 | (uint32_t)f[pos + 2] << 16 | (uint32_t)f[pos + 3] << 24;
        if (c == 0 || c > 65536) return (ref_result){LT_ERR_CORRUPT, LT_REC_BAD_COUNT, r.records, r.blocks, pos};
        if (pos + 4 + (uint64_t)c * rs + 32 > len)
            return (ref_result){LT_ERR_CORRUPT, LT_REC_BLOCK_CUT, r.records, r.blocks, pos};
        r.records += c;
        r.blocks++;
        pos += 4 + (size_t)c * rs + 32;
    }
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    static const size_t sizes[] = {48, 64, 0, 47, 80, 1};
    size_t rs = sizes[data[0] % 6], leaf = (size_t)1 << (data[1] % 17);
    int want_leaves = data[1] & 0x80, short_out = data[2] & 1;
    const uint8_t *file = data + 3;
    size_t len = size - 3;
    size_t out_len = len > 256 ? len - 256 : 0;
    uint8_t *out = malloc(out_len ? out_len : 1);
    lt_rec_info info;
    int rc;
    if (rs != 48 && rs != 64) {
        rc = lt_rec_records(file, len, rs, 0, out, out_len, leaf, NULL, 0, &info);
        FUZZ_CHECK(rc == LT_ERR_ARG, "record size %zu accepted", rs);
        free(out);
        return 0;
    }
    ref_result ref = ref_walk(file, len, rs);
    if (short_out && ref.records) out_len = (size_t)ref.records * rs - 1;
    size_t nleaves = (size_t)(ref.records / leaf + (ref.records % leaf != 0));
    size_t leaves_len = nleaves * 32;
    uint8_t *leaves = want_leaves ? malloc(leaves_len ? leaves_len : 1) : NULL;
    uint64_t first_seq = len >= 268 ? lt_load_le64_fuzz(file + 260) : 0;  /* the first record's seq, when there is one */
    rc = lt_rec_records(file, len, rs, first_seq, out, out_len, leaf, leaves, leaves_len, &info);
    if (short_out && ref.records && ref.rc == LT_OK) {
        FUZZ_CHECK(rc == LT_ERR_ARG, "an output one byte short gave %d", rc);
    } else if (!(short_out && ref.records)) {
        FUZZ_CHECK(rc == ref.rc, "status %d, reference %d", rc, ref.rc);
        FUZZ_CHECK(info.records == ref.records && info.blocks == ref.blocks, "counts %llu/%llu, reference %llu/%llu",
                   (unsigned long long)info.records, (unsigned long long)info.blocks,
                   (unsigned long long)ref.records, (unsigned long long)ref.blocks);
        if (rc == LT_ERR_CORRUPT)
            FUZZ_CHECK(info.error == ref.error && info.error_offset == ref.offset, "error %d at %llu, reference %d at %llu",
                       info.error, (unsigned long long)info.error_offset, ref.error, (unsigned long long)ref.offset);
        /* the records copied are the blocks' records, in order */
        size_t pos = 256, used = 0;
        for (uint64_t b = 0; b < info.blocks; b++) {
            uint32_t c = (uint32_t)file[pos] | (uint32_t)file[pos + 1] << 8 | (uint32_t)file[pos + 2] << 16 |
                         (uint32_t)file[pos + 3] << 24;
            FUZZ_CHECK(memcmp(out + used, file + pos + 4, (size_t)c * rs) == 0, "block %llu copied wrong",
                       (unsigned long long)b);
            used += (size_t)c * rs;
            pos += 4 + (size_t)c * rs + 32;
        }
        /* the per-record facts, recounted from the copied records */
        uint64_t gaps = 0, drops = 0;
        int contiguous = 1;
        for (uint64_t k = 0; k < info.records; k++) {
            const uint8_t *r = out + k * rs;
            contiguous &= lt_load_le64_fuzz(r) == first_seq + k;
            if (r[25] & 0x80) gaps++, drops += (uint32_t)r[28] | (uint32_t)r[29] << 8 | (uint32_t)r[30] << 16 | (uint32_t)r[31] << 24;
        }
        FUZZ_CHECK(info.gaps == gaps && info.drops == drops && info.seq_contiguous == contiguous, "tally differs");
        if (info.records)
            FUZZ_CHECK(info.first_ts_ns == (int64_t)lt_load_le64_fuzz(out + 8) &&
                       info.last_ts_ns == (int64_t)lt_load_le64_fuzz(out + (info.records - 1) * rs + 8), "ts");
        if (rc == LT_OK && leaves && nleaves) {
            uint8_t *want = malloc(leaves_len);
            FUZZ_CHECK(lt_merkle_leaves(out, rs, (size_t)ref.records, leaf, want, leaves_len) == LT_OK, "leaves");
            FUZZ_CHECK(memcmp(want, leaves, leaves_len) == 0, "leaves differ from lt_merkle_leaves");
            free(want);
        }
        if (leaves) { /* lt_rec_leaves, in place: the same status, counts, facts and leaves */
            lt_rec_info in_place;
            uint8_t *got = malloc(leaves_len ? leaves_len : 1);
            int rc2 = lt_rec_leaves(file, len, rs, first_seq, leaf, got, leaves_len, &in_place);
            FUZZ_CHECK(rc2 == rc, "lt_rec_leaves status %d, lt_rec_records %d", rc2, rc);
            FUZZ_CHECK(in_place.records == info.records && in_place.blocks == info.blocks &&
                       in_place.error == info.error && in_place.error_offset == info.error_offset,
                       "lt_rec_leaves info differs");
            /* the per-record tally (gaps, drops, contiguity, timestamps) is complete on success
             * only: the staged walk tallies a stage when it is full, so at an error the records
             * staged since the last full stage are not counted (lt_rec_records counts each block) */
            if (rc == LT_OK)
                FUZZ_CHECK(in_place.gaps == info.gaps && in_place.drops == info.drops &&
                           in_place.seq_contiguous == info.seq_contiguous &&
                           in_place.first_ts_ns == info.first_ts_ns &&
                           in_place.last_ts_ns == info.last_ts_ns, "lt_rec_leaves tally differs");
            if (rc == LT_OK) FUZZ_CHECK(memcmp(got, leaves, leaves_len) == 0, "lt_rec_leaves leaves differ");
            free(got);
        }
    }
    free(leaves);
    free(out);
    return 0;
}
