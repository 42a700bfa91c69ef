/*
 * Raw record files: the sealed segments of ledger format v2 (`seg-N.rec`, docs/ledger-format.md,
 * "Sealed segment: raw record file"), byte for byte an open-segment v2 file: a 256-byte header
 * (decoded and compared with the seal in Python), then blocks of u32 count || count records ||
 * 32-byte MAC. The verifier has no MAC key and signs nothing here: it walks the framing, copies the
 * records into one contiguous buffer (what the seal's Merkle root covers) and hashes its leaves.
 *
 * The file is the storage holder's, so the walk is bounded: every count in
 * 1..LT_REC_MAX_BLOCK_RECORDS, every block whole inside the file, no byte after the last block, the
 * output never written past out_len; sizes in 64-bit arithmetic checked before use (a count of at
 * most 2^16 times a record of 64 bytes cannot overflow).
 */
#include "ledgertool.h"
#include "lt_internal.h"

static int fail(lt_rec_info *info, int why, uint64_t offset, uint32_t count) {
    info->error = why;
    info->error_offset = offset;
    info->error_count = count;
    return LT_ERR_CORRUPT;
}

/* The per-record facts verify checks, over one block's records (hot in L1 after the copy). */
static void tally(const uint8_t *rec, size_t count, size_t record_size, uint64_t first_seq, lt_rec_info *info) {
    uint64_t want = first_seq + info->records, gaps = 0, drops = 0;
    int contiguous = info->seq_contiguous;
    for (size_t k = 0; k < count; k++, rec += record_size, want++) {
        contiguous &= lt_load_le64(rec) == want;
        if ((rec[24] | (uint16_t)rec[25] << 8) & LT_FLAG_GAP) {
            gaps++;
            drops += lt_load_le32(rec + 28);
        }
    }
    info->seq_contiguous = contiguous;
    info->gaps += gaps;
    info->drops += drops;
}

int lt_rec_records(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, uint8_t *out,
                   size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    if (!info || (len && !file) || (record_size != LT_RECORD_FIXED + 16 && record_size != LT_RECORD_FIXED + 32) ||
        (out_len && !out))
        return LT_ERR_ARG;
    memset(info, 0, sizeof *info);
    info->seq_contiguous = 1;
    if (len < LT_REC_HEADER_SIZE) return fail(info, LT_REC_HEADER_CUT, len, 0);
    size_t pos = LT_REC_HEADER_SIZE, used = 0;
    while (pos < len) {
        if (len - pos < 4) return fail(info, LT_REC_TRAILING, pos, 0);
        uint32_t count = lt_load_le32(file + pos);
        if (count < 1 || count > LT_REC_MAX_BLOCK_RECORDS) return fail(info, LT_REC_BAD_COUNT, pos, count);
        size_t body = (size_t)count * record_size;
        if (len - pos - 4 < body + LT_REC_MAC_SIZE) return fail(info, LT_REC_BLOCK_CUT, pos, count);
        if (out_len - used < body) return LT_ERR_ARG;
        memcpy(out + used, file + pos + 4, body);
        tally(out + used, count, record_size, first_seq, info);
        if (!info->records) info->first_ts_ns = (int64_t)lt_load_le64(out + 8);
        info->last_ts_ns = (int64_t)lt_load_le64(out + used + body - record_size + 8);
        used += body;
        info->records += count;
        info->blocks++;
        pos += 4 + body + LT_REC_MAC_SIZE;
    }
    if (!leaves) return LT_OK;
    return lt_merkle_leaves(out, record_size, used / record_size, leaf_records, leaves, leaves_len);
}
