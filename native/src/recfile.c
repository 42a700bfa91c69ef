/*
 * Raw record files: the sealed segments of ledger format v2 (`seg-N.rec`, docs/ledger-format.md,
 * "Sealed segment: raw record file"), byte for byte an open-segment v2 file: a 256-byte header
 * (decoded and compared with the seal in Python), then blocks of u32 count || count records ||
 * 32-byte MAC. The verifier has no MAC key and signs nothing here: it walks the framing, copies the
 * records into one contiguous buffer (what the seal's Merkle root covers) and hashes its leaves, or
 * (lt_rec_leaves, when no reader wants the records) hashes the leaves where they lie in the file;
 * lt_rec_file does either over a guarded map of the file instead of a buffer it was read into.
 *
 * The file is the storage holder's, so the walk is bounded: every count in
 * 1..LT_REC_MAX_BLOCK_RECORDS, every block whole inside the file, no byte after the last block, the
 * output never written past out_len; sizes in 64-bit arithmetic checked before use (a count of at
 * most 2^16 times a record of 64 bytes cannot overflow).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "ledgertool.h"
#include "lt_internal.h"

static int fail(lt_rec_info *info, int why, uint64_t offset, uint32_t count) {
    info->error = why;
    info->error_offset = offset;
    info->error_count = count;
    return LT_ERR_CORRUPT;
}

/* The per-record facts verify checks, over one block's records. The common block (seq in order, no
 * GAP record) costs two loads and two ORs a record, no compare-and-branch per record: seq's
 * difference from the expected run and every record's flags are OR-ed together, and only a block
 * whose OR has LT_FLAG_GAP is walked again to count its GAP records and their drops. */
_Static_assert(LT_FLAG_GAP == 0x8000, "tally tests the flags' high byte");
static void tally(const uint8_t *rec, size_t count, size_t record_size, uint64_t first_seq, lt_rec_info *info) {
    uint64_t want = first_seq + info->records, off_run = 0;
    unsigned flags = 0;
    const uint8_t *r = rec;
    for (size_t k = 0; k < count; k++, r += record_size, want++) {
        off_run |= lt_load_le64(r) ^ want;
        flags |= r[25]; /* the high byte of the u16 flags: LT_FLAG_GAP is its top bit */
    }
    if (off_run) info->seq_contiguous = 0;
    if (!(flags & (LT_FLAG_GAP >> 8))) return;
    uint64_t gaps = 0, drops = 0;
    for (size_t k = 0; k < count; k++, rec += record_size)
        if ((rec[24] | (uint16_t)rec[25] << 8) & LT_FLAG_GAP) {
            gaps++;
            drops += lt_load_le32(rec + 28);
        }
    info->gaps += gaps;
    info->drops += drops;
}

/* In-place leaves: whole leaves are hashed where they lie, four at a time across block boundaries
 * (lt_merkle_leaf_group); a leaf that spans blocks (the writer closes a short block when an append
 * ends mid-leaf) and the last, shorter leaf are gathered in `stage` first. */
typedef struct {
    uint8_t *stage, *leaves;
    const uint8_t *end; /* the end of the file's bytes: the prefetch ahead of a group stops there */
    size_t leaf_records, pend, nleaves, cap;
    const uint8_t *q[4]; /* whole leaves waiting for a group of four */
    uint8_t *qout[4];
    size_t qn;
} leaf_walk;

/* While a group is hashed, the file bytes after its last leaf are prefetched: four leaves and their
 * framing, what the walk reads next (the tally, then the next group), so their first touch from
 * memory overlaps the rounds. */
static void leaf_queue_flush(leaf_walk *lw, size_t record_size) {
    const size_t leaf_len = lw->leaf_records * record_size;
    const uint8_t *ahead = lw->q[lw->qn - 1] + leaf_len; /* <= end: the leaf lies in the file */
    size_t want = 4 * (leaf_len + 4 + LT_REC_MAC_SIZE), left = (size_t)(lw->end - ahead);
    lt_merkle_leaf_group(lw->q, lw->qn, leaf_len, lw->qout, ahead, ahead + (left < want ? left : want));
    lw->qn = 0;
}

static int leaf_in_place(leaf_walk *lw, const uint8_t *p, size_t n, size_t record_size) {
    if (lw->nleaves >= lw->cap) return LT_ERR_ARG;
    uint8_t *out = lw->leaves + 32 * lw->nleaves++;
    if (n < lw->leaf_records) { /* a staged leaf: hashed now, the stage is reused */
        const uint8_t *const one[4] = {p};
        uint8_t *const dst[4] = {out};
        lt_merkle_leaf_group(one, 1, n * record_size, dst, NULL, NULL);
        return LT_OK;
    }
    lw->q[lw->qn] = p, lw->qout[lw->qn] = out;
    if (++lw->qn == 4) leaf_queue_flush(lw, record_size);
    return LT_OK;
}

static int leaf_block(leaf_walk *lw, const uint8_t *p, size_t count, size_t record_size) {
    const size_t L = lw->leaf_records;
    int st;
    if (lw->pend) {
        size_t take = L - lw->pend < count ? L - lw->pend : count;
        memcpy(lw->stage + lw->pend * record_size, p, take * record_size);
        lw->pend += take, p += take * record_size, count -= take;
        if (lw->pend < L) return LT_OK; /* the leaf is still open: this block's records are all in it */
        lw->pend = 0;
        /* a full staged leaf: through the one-leaf path (the stage is reused below) */
        if (lw->nleaves >= lw->cap) return LT_ERR_ARG;
        const uint8_t *const one[4] = {lw->stage};
        uint8_t *const dst[4] = {lw->leaves + 32 * lw->nleaves++};
        lt_merkle_leaf_group(one, 1, L * record_size, dst, NULL, NULL);
    }
    for (; count >= L; p += L * record_size, count -= L)
        if ((st = leaf_in_place(lw, p, L, record_size)) != LT_OK) return st;
    memcpy(lw->stage, p, count * record_size); /* count < L: the next leaf's first records */
    lw->pend = count;
    return LT_OK;
}

/* Leaves of the copy (lt_rec_records and lt_rec_file with `out` and `leaves`): hashed block by
 * block as the copy completes them, while the records just copied are still in L2, instead of in a
 * second pass over the whole copy from L3 or memory. The leaves are those of the copy's bytes, as
 * before: only their timing changed. */
typedef struct {
    size_t leaf_records, hashed; /* records of `out` hashed so far: whole leaves */
    uint8_t *leaves;
    size_t leaves_len;
} copy_leaves;

static int copy_leaves_upto(copy_leaves *cl, const uint8_t *out, size_t record_size, size_t records, int last) {
    size_t upto = last ? records : records / cl->leaf_records * cl->leaf_records;
    if (upto <= cl->hashed) return LT_OK;
    size_t done = cl->hashed / cl->leaf_records; /* (hashed is a whole number of leaves) */
    if (cl->leaves_len / 32 < done) return LT_ERR_ARG;
    int st = lt_merkle_leaves(out + cl->hashed * record_size, record_size, upto - cl->hashed, cl->leaf_records,
                              cl->leaves + 32 * done, cl->leaves_len - 32 * done);
    cl->hashed = upto;
    return st;
}

/* The block walk of lt_rec_records and lt_rec_leaves: records copied to out (their leaves hashed as
 * they complete when cl is given), or (lw) hashed in place. */
static int rec_walk(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, uint8_t *out,
                    size_t out_len, leaf_walk *lw, copy_leaves *cl, lt_rec_info *info) {
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
        const uint8_t *rec = file + pos + 4;
        if (!lw) {
            if (out_len - used < body) return LT_ERR_ARG;
            memcpy(out + used, rec, body);
            rec = out + used;
        } else {
            int st = leaf_block(lw, rec, count, record_size);
            if (st != LT_OK) return st;
        }
        tally(rec, count, record_size, first_seq, info);
        if (!info->records) info->first_ts_ns = (int64_t)lt_load_le64(rec + 8);
        info->last_ts_ns = (int64_t)lt_load_le64(rec + body - record_size + 8);
        used += body;
        info->records += count;
        info->blocks++;
        pos += 4 + body + LT_REC_MAC_SIZE;
        if (cl) {
            int st = copy_leaves_upto(cl, out, record_size, info->records, 0);
            if (st != LT_OK) return st;
        }
    }
    return cl ? copy_leaves_upto(cl, out, record_size, info->records, 1) : LT_OK;
}

static int leaves_args_ok(size_t record_size, const uint8_t *leaves, size_t leaf_records) {
    return (record_size == LT_RECORD_FIXED + 16 || record_size == LT_RECORD_FIXED + 32) && leaves && leaf_records &&
           leaf_records <= LT_MERKLE_MAX_LEAF_RECORDS && !(leaf_records & (leaf_records - 1));
}

int lt_rec_records(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, uint8_t *out,
                   size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    if (!info || (len && !file) || (record_size != LT_RECORD_FIXED + 16 && record_size != LT_RECORD_FIXED + 32) ||
        (out_len && !out))
        return LT_ERR_ARG;
    if (leaves && !leaves_args_ok(record_size, leaves, leaf_records)) return LT_ERR_ARG;
    copy_leaves cl = {.leaf_records = leaf_records, .leaves = leaves, .leaves_len = leaves_len};
    return rec_walk(file, len, record_size, first_seq, out, out_len, NULL, leaves ? &cl : NULL, info);
}



/* The in-place walk with a stage the caller allocated (lt_rec_file allocates nothing under its guard). */
static int leaves_walk(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, uint8_t *stage,
                       size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    leaf_walk lw = {.stage = stage, .leaves = leaves, .end = file + len, .leaf_records = leaf_records,
                    .cap = leaves_len / 32};
    int st = rec_walk(file, len, record_size, first_seq, NULL, 0, &lw, NULL, info);
    if (st == LT_OK && lw.qn) leaf_queue_flush(&lw, record_size);
    if (st == LT_OK && lw.pend) st = leaf_in_place(&lw, lw.stage, lw.pend, record_size); /* the last, shorter leaf */
    return st;
}

int lt_rec_leaves(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, size_t leaf_records,
                  uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    if (!info || (len && !file) || !leaves_args_ok(record_size, leaves, leaf_records)) return LT_ERR_ARG;
    uint8_t *stage = malloc(leaf_records * record_size);
    if (!stage) return LT_ERR_NOMEM;
    int st = leaves_walk(file, len, record_size, first_seq, stage, leaf_records, leaves, leaves_len, info);
    free(stage);
    return st;
}

/* The walks over a map of the file: no read(2) into a fresh buffer (its page faults and copy), and
 * for plain verify no copy at all. The map lives for this call only, under the SIGBUS guard of
 * reader.c, so a file truncated under it is an error naming the byte, never a crash; nothing is
 * allocated or locked while the map is read (the stage is allocated before). */
int lt_rec_file(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    if (!info || !header || fd < 0 || (out && !out_len)) return LT_ERR_ARG;
    if (out ? !(record_size == LT_RECORD_FIXED + 16 || record_size == LT_RECORD_FIXED + 32)
            : !leaves_args_ok(record_size, leaves, leaf_records))
        return LT_ERR_ARG;
    memset(info, 0, sizeof *info);
    if (len < LT_REC_HEADER_SIZE) return fail(info, LT_REC_HEADER_CUT, len, 0);
    /* volatile: read again after a siglongjmp back into this frame (free below) */
    uint8_t *volatile stage = out ? NULL : malloc(leaf_records * record_size);
    if (!out && !stage) return LT_ERR_NOMEM;
    /* MAP_POPULATE: the file's cached pages are mapped in one call instead of a fault per few pages;
     * a page gone by truncation is simply not populated (the guard catches the read) */
    const uint8_t *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
        int saved = errno;
        free(stage);
        errno = saved;
        return LT_ERR_IO;
    }
    int st;
    lt_bus_guard g;
    lt_bus_guard_push_map(&g, map, len);
    if (sigsetjmp(g.jb, 0)) { /* the file shrank under the map: g is popped already */
        munmap((void *)map, len);
        free(stage);
        memset(info, 0, sizeof *info);
        fail(info, LT_REC_SHRUNK, g.fault, 0);
        return LT_ERR_IO;
    }
    memcpy(header, map, LT_REC_HEADER_SIZE);
    copy_leaves cl = {.leaf_records = leaf_records, .leaves = leaves, .leaves_len = leaves_len};
    if (out && leaves && !leaves_args_ok(record_size, leaves, leaf_records))
        st = LT_ERR_ARG;
    else if (out) /* the leaves hashed from the copy, block by block (never from the map) */
        st = rec_walk(map, len, record_size, first_seq, out, out_len, NULL, leaves ? &cl : NULL, info);
    else
        st = leaves_walk(map, len, record_size, first_seq, stage, leaf_records, leaves, leaves_len, info);
    lt_bus_guard_pop(&g);
    munmap((void *)map, len);
    free(stage);
    return st;
}
