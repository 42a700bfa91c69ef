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

int lt_rec_records(const uint8_t *file, size_t len, size_t record_size, uint8_t *out, size_t out_len,
                   size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    if (!info || (len && !file) || (record_size != LT_RECORD_FIXED + 16 && record_size != LT_RECORD_FIXED + 32) ||
        (out_len && !out))
        return LT_ERR_ARG;
    memset(info, 0, sizeof *info);
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
        used += body;
        info->records += count;
        info->blocks++;
        pos += 4 + body + LT_REC_MAC_SIZE;
    }
    if (!leaves) return LT_OK;
    return lt_merkle_leaves(out, record_size, used / record_size, leaf_records, leaves, leaves_len);
}
