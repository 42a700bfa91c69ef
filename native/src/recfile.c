/*
 * Raw record files: the sealed segments of ledger format v2 (`seg-N.rec`, docs/ledger-format.md,
 * "Sealed segment: raw record file"), byte for byte an open-segment v2 file: a 256-byte header
 * (decoded and compared with the seal in Python), then blocks of u32 count || count records ||
 * 32-byte MAC. The verifier has no MAC key and signs nothing here: it walks the framing, copies the
 * records into one contiguous buffer (what the seal's Merkle root covers) and hashes its leaves, or
 * (lt_rec_leaves, when no reader wants the records) copies them piece by piece into a small stage
 * and hashes them there; either way every fact and leaf comes from a copy, never from a second
 * read of the file. lt_rec_file does either over a guarded map of the file instead of a buffer it
 * was read into.
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
static void tally(const uint8_t *rec, size_t count, size_t record_size, uint64_t want, lt_rec_info *info) {
    uint64_t off_run = 0;
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

/* The leaves without a copy for the caller (lt_rec_leaves; lt_rec_file without `out`): each
 * block's records are copied piecewise into `stage` (whole leaves, ~4096 records: it stays in L2),
 * and the per-record tally and the leaves of a full stage are computed from that copy. So the facts
 * verify checks and the leaves it compares with the seal's root come from the same bytes even when
 * the storage holder rewrites the mapped file while it is walked (each byte of the file is read once;
 * hashing in place read it twice, tally first). */
typedef struct {
    uint8_t *stage, *leaves;
    const uint8_t *end; /* the end of the file's bytes */
    size_t leaf_records, cap; /* the stage's records: a whole number of leaves */
    size_t fill, nleaves, max_leaves;
    uint64_t first_seq, tallied; /* records tallied and hashed so far */
} leaf_walk;

static size_t stage_records(size_t leaf_records) { /* four leaves (the SHA-NI streams), at least 1024 records */
    return leaf_records * (leaf_records < 256 ? 1024 / leaf_records : 4);
}

static int stage_flush(leaf_walk *lw, size_t record_size, lt_rec_info *info) {
    size_t n = lw->fill, L = lw->leaf_records;
    if (!n) return LT_OK;
    tally(lw->stage, n, record_size, lw->first_seq + lw->tallied, info);
    if (!lw->tallied) info->first_ts_ns = (int64_t)lt_load_le64(lw->stage + 8);
    info->last_ts_ns = (int64_t)lt_load_le64(lw->stage + (n - 1) * record_size + 8);
    size_t k = (n + L - 1) / L;
    if (lw->max_leaves - lw->nleaves < k) return LT_ERR_ARG;
    int st = lt_merkle_leaves(lw->stage, record_size, n, L, lw->leaves + 32 * lw->nleaves, 32 * k);
    lw->nleaves += k, lw->tallied += n, lw->fill = 0;
    return st;
}

static int stage_block(leaf_walk *lw, const uint8_t *p, size_t count, size_t record_size, lt_rec_info *info) {
    while (count) {
        size_t take = lw->cap - lw->fill < count ? lw->cap - lw->fill : count;
        memcpy(lw->stage + lw->fill * record_size, p, take * record_size);
        lw->fill += take, p += take * record_size, count -= take;
        if (lw->fill == lw->cap) {
            /* the file bytes the next stage copies (and a block's framing), from memory while this
             * one is hashed: a prefetch is a hint, it never faults, and it stops at the file's end */
            size_t ahead = lw->cap * record_size + 64, left = (size_t)(lw->end - p);
            for (size_t k = 0; k < (ahead < left ? ahead : left); k += 64)
                __builtin_prefetch(p + k);
            int st = stage_flush(lw, record_size, info);
            if (st != LT_OK) return st;
        }
    }
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
    /* lt_rec_file_mset: the same records, once hashed, into a multiset hash and per-second runs */
    const uint8_t *mkey; /* NULL: none */
    const uint64_t *part_key;
    unsigned part_bits;
    uint64_t *acc, *mcount;
    int64_t *secs;
    uint64_t *counts;
    size_t cap, runs;
} copy_leaves;

static int copy_leaves_upto(copy_leaves *cl, const uint8_t *out, size_t record_size, size_t records, int last) {
    size_t upto = last ? records : records / cl->leaf_records * cl->leaf_records;
    if (upto <= cl->hashed) return LT_OK;
    size_t done = cl->hashed / cl->leaf_records; /* (hashed is a whole number of leaves) */
    if (cl->leaves_len / 32 < done) return LT_ERR_ARG;
    const uint8_t *from = out + cl->hashed * record_size;
    size_t n = upto - cl->hashed;
    int st = lt_merkle_leaves(from, record_size, n, cl->leaf_records, cl->leaves + 32 * done,
                              cl->leaves_len - 32 * done);
    if (st == LT_OK && cl->mkey) { /* the bytes just hashed, still in cache */
        st = lt_mset_add_parts(cl->mkey, cl->part_key, cl->part_bits, from, n, record_size, LT_RECORD_FIXED,
                               record_size - LT_RECORD_FIXED, LT_FLAG_GAP, 0, cl->acc, cl->mcount);
        size_t at = cl->runs < cl->cap ? cl->runs : cl->cap, got = 0;
        if (st == LT_OK)
            st = lt_second_runs(from, n, record_size, LT_FLAG_GAP, cl->secs + at, cl->counts + at, cl->cap - at, &got);
        cl->runs += got;
    }
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
            rec = out + used; /* everything below reads the copy */
            tally(rec, count, record_size, first_seq + info->records, info);
            if (!info->records) info->first_ts_ns = (int64_t)lt_load_le64(rec + 8);
            info->last_ts_ns = (int64_t)lt_load_le64(rec + body - record_size + 8);
        } else {
            int st = stage_block(lw, rec, count, record_size, info); /* the tally and leaves of the stage */
            if (st != LT_OK) return st;
        }
        used += body;
        info->records += count;
        info->blocks++;
        pos += 4 + body + LT_REC_MAC_SIZE;
        if (cl) {
            int st = copy_leaves_upto(cl, out, record_size, info->records, 0);
            if (st != LT_OK) return st;
        }
    }
    if (lw) return stage_flush(lw, record_size, info);
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



/* The staged walk with a stage the caller allocated (lt_rec_file allocates nothing under its guard). */
static int leaves_walk(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, uint8_t *stage,
                       size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    leaf_walk lw = {.stage = stage, .leaves = leaves, .end = file + len, .leaf_records = leaf_records,
                    .cap = stage_records(leaf_records), .max_leaves = leaves_len / 32, .first_seq = first_seq};
    return rec_walk(file, len, record_size, first_seq, NULL, 0, &lw, NULL, info);
}

int lt_rec_leaves(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, size_t leaf_records,
                  uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    if (!info || (len && !file) || !leaves_args_ok(record_size, leaves, leaf_records)) return LT_ERR_ARG;
    uint8_t *stage = malloc(stage_records(leaf_records) * record_size);
    if (!stage) return LT_ERR_NOMEM;
    int st = leaves_walk(file, len, record_size, first_seq, stage, leaf_records, leaves, leaves_len, info);
    free(stage);
    return st;
}

/* The walks over a map of the file: no read(2) into a fresh buffer (its page faults and copy), and
 * for plain verify no copy at all. The map lives for this call only, under the SIGBUS guard of
 * reader.c, so a file truncated under it is an error naming the byte, never a crash; nothing is
 * allocated or locked while the map is read (the stage is allocated before). */
static int rec_file(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                    size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, copy_leaves *cl,
                    lt_rec_info *info);

int lt_rec_file(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    copy_leaves cl = {.leaf_records = leaf_records, .leaves = leaves, .leaves_len = leaves_len};
    return rec_file(fd, len, record_size, first_seq, header, out, out_len, leaf_records, leaves, leaves_len, &cl, info);
}

int lt_rec_file_mset(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                     size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, const uint8_t key[16],
                     const uint64_t part_key[2], unsigned part_bits, uint64_t *acc, uint64_t *count, int64_t *secs,
                     uint64_t *counts, size_t cap, size_t *nruns, lt_rec_info *info) {
    if (!out || !leaves || !key || !acc || !count || !nruns || (cap && (!secs || !counts)) ||
        (part_bits && !part_key) || part_bits > LT_MSET_MAX_PART_BITS)
        return LT_ERR_ARG;
    copy_leaves cl = {.leaf_records = leaf_records, .leaves = leaves, .leaves_len = leaves_len, .mkey = key,
                      .part_key = part_key, .part_bits = part_bits, .acc = acc, .mcount = count, .secs = secs, .counts = counts, .cap = cap};
    int st = rec_file(fd, len, record_size, first_seq, header, out, out_len, leaf_records, leaves, leaves_len, &cl, info);
    *nruns = cl.runs;
    return st;
}

static int rec_file(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                    size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, copy_leaves *cl,
                    lt_rec_info *info) {
    if (!info || !header || fd < 0 || (out && !out_len)) return LT_ERR_ARG;
    if (out ? !(record_size == LT_RECORD_FIXED + 16 || record_size == LT_RECORD_FIXED + 32)
            : !leaves_args_ok(record_size, leaves, leaf_records))
        return LT_ERR_ARG;
    memset(info, 0, sizeof *info);
    if (len < LT_REC_HEADER_SIZE) return fail(info, LT_REC_HEADER_CUT, len, 0);
    /* volatile: read again after a siglongjmp back into this frame (free below) */
    uint8_t *volatile stage = out ? NULL : malloc(stage_records(leaf_records) * record_size);
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
    if (out && leaves && !leaves_args_ok(record_size, leaves, leaf_records))
        st = LT_ERR_ARG;
    else if (out) /* the leaves hashed from the copy, block by block (never from the map) */
        st = rec_walk(map, len, record_size, first_seq, out, out_len, NULL, leaves ? cl : NULL, info);
    else
        st = leaves_walk(map, len, record_size, first_seq, stage, leaf_records, leaves, leaves_len, info);
    lt_bus_guard_pop(&g);
    munmap((void *)map, len);
    free(stage);
    return st;
}
