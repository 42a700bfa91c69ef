/*
 * Raw record files: the sealed segments of ledger format v2 (`seg-N.rec`, docs/ledger-format.md,
 * "Sealed segment: raw record file"), byte for byte an open-segment v2 file: a 256-byte header
 * (decoded and compared with the seal in Python), then blocks of u32 count || count records ||
 * 32-byte MAC. The verifier has no MAC key and signs nothing here: it walks the framing, copies the
 * records into one contiguous buffer (what the seal's Merkle root covers) and hashes its leaves, or
 * (lt_rec_leaves, when no reader wants the records) copies them piece by piece into a small stage
 * and hashes them there; either way every fact and leaf comes from a copy, never from a second
 * read of the file. lt_rec_file does either over the open file, read with pread(2) straight into
 * the copy or the stage (a small window buffers the block framing), never mapped: a page the
 * storage cannot read is then an EIO naming the byte, where a map (MAP_POPULATE) waited in the
 * kernel for ever, and no page table is built and torn down per segment.
 *
 * The file is the storage holder's, so the walk is bounded: every count in
 * 1..LT_REC_MAX_BLOCK_RECORDS, every block whole inside the file, no byte after the last block, the
 * output never written past out_len; sizes in 64-bit arithmetic checked before use (a count of at
 * most 2^16 times a record of 64 bytes cannot overflow).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "ledgertool.h"
#include "lt_internal.h"

static int fail(lt_rec_info *info, int why, uint64_t offset, uint32_t count) {
    info->error = why;
    info->error_offset = offset;
    info->error_count = count;
    return LT_ERR_CORRUPT;
}

/* Where a walk reads the file's bytes: `mem` (lt_rec_records, lt_rec_leaves: the caller's buffer)
 * or the file open on `fd` (lt_rec_file), read with pread(2): a copy of any size at least
 * SRC_DIRECT goes straight into its destination (the caller's copy, the stage), smaller reads and
 * the 4-byte counts through `win`, a window of the file's bytes [at, at + have) read SRC_WINDOW
 * at a time (a file of many small blocks costs one system call per window, not two per block).
 * Every destination is memory of this process, so a byte is read from the file once and the
 * checks and leaves read that copy (whole leaves are hashed in the window itself: stage_block). */
#define SRC_WINDOW (256u << 10)
#define SRC_DIRECT (16u << 10)
typedef struct {
    const uint8_t *mem;
    int fd;
    uint64_t len; /* the file's size (the caller's fstat): nothing at or past it is read */
    uint8_t *win;
    uint64_t at;
    size_t have;
} rec_src;

/* n bytes of the file from `pos` into dst; fewer than `need` (<= n) is an error: the file ended
 * (LT_REC_SHRUNK: it shrank since the caller's fstat) or the read failed (LT_REC_READ, errno kept:
 * EIO from a failing disk). *got: the bytes read. The error names the first byte not read. */
static int src_pread(const rec_src *s, uint64_t pos, uint8_t *dst, size_t n, size_t need,
                     size_t *got, lt_rec_info *info) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(s->fd, dst + done, n - done, (off_t)(pos + done));
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (done >= need) break; /* read ahead only: what is missing is not wanted yet */
        int saved = k < 0 ? errno : 0;
        fail(info, k < 0 ? LT_REC_READ : LT_REC_SHRUNK, pos + done, 0);
        errno = saved;
        return LT_ERR_IO;
    }
    *got = done;
    return LT_OK;
}

/* The n bytes of the file at pos, copied to dst. */
static int src_copy(rec_src *s, uint64_t pos, uint8_t *dst, size_t n, lt_rec_info *info) {
    if (s->mem) {
        memcpy(dst, s->mem + pos, n);
        return LT_OK;
    }
    while (n) {
        if (pos >= s->at && pos < s->at + s->have) {
            size_t k = (size_t)(s->at + s->have - pos) < n ? (size_t)(s->at + s->have - pos) : n;
            memcpy(dst, s->win + (pos - s->at), k);
            pos += k, dst += k, n -= k;
            continue;
        }
        size_t got;
        if (n >= SRC_DIRECT) return src_pread(s, pos, dst, n, n, &got, info);
        size_t want = s->len - pos < SRC_WINDOW ? (size_t)(s->len - pos) : SRC_WINDOW;
        s->have = 0;
        int st = src_pread(s, pos, s->win, want, n, &got, info);
        if (st != LT_OK) return st;
        s->at = pos, s->have = got;
    }
    return LT_OK;
}

/* *p: the n (<= SRC_WINDOW) bytes of the file at pos, in the window (read into it if not there). */
static int src_view(rec_src *s, uint64_t pos, size_t n, const uint8_t **p, lt_rec_info *info) {
    if (pos < s->at || pos + n > s->at + s->have) {
        size_t want = s->len - pos < SRC_WINDOW ? (size_t)(s->len - pos) : SRC_WINDOW, got;
        s->have = 0;
        int st = src_pread(s, pos, s->win, want, n, &got, info);
        if (st != LT_OK) return st;
        s->at = pos, s->have = got;
    }
    *p = s->win + (pos - s->at);
    return LT_OK;
}

/* The u32 (a block's count) at pos. */
static int src_le32(rec_src *s, uint64_t pos, uint32_t *v, lt_rec_info *info) {
    uint8_t b[4];
    int st = src_copy(s, pos, b, 4, info);
    *v = lt_load_le32(b);
    return st;
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
 * the storage holder rewrites the file (or the caller's buffer) while it is walked (each byte of
 * the file is read once; hashing in place read it twice, tally first). */
typedef struct {
    uint8_t *stage, *leaves;
    size_t leaf_records, cap; /* the stage's records: a whole number of leaves */
    size_t hash;              /* 0 or LT_LEAF_BLAKE3: the ledger's leaf construction */
    size_t fill, nleaves, max_leaves;
    uint64_t first_seq, tallied; /* records tallied and hashed so far */
} leaf_walk;

/* Whole leaves hashed side by side (lt_merkle_lanes): sixteen where the AVX-512 lanes run and they
 * fit in a read window, else four (the SHA-NI streams). */
static size_t lane_leaves(size_t leaf_records, size_t record_size) {
    return lt_merkle_lanes() == 16 && 16 * leaf_records * record_size <= SRC_WINDOW ? 16 : 4;
}

static size_t stage_records(size_t leaf_records, size_t record_size) { /* lane_leaves, at least 4096 records */
    size_t n = leaf_records * lane_leaves(leaf_records, record_size);
    return n < 4096 ? 4096 : n; /* leaf_records is a power of two: 4096 is whole leaves */
}

/* The tally and the leaves of the next n records, at p (the stage, or the read window): whole
 * leaves but for the file's last. */
static int walk_leaves(leaf_walk *lw, const uint8_t *p, size_t n, size_t record_size,
                       lt_rec_info *info) {
    size_t L = lw->leaf_records;
    if (!n) return LT_OK;
    tally(p, n, record_size, lw->first_seq + lw->tallied, info);
    if (!lw->tallied) info->first_ts_ns = (int64_t)lt_load_le64(p + 8);
    info->last_ts_ns = (int64_t)lt_load_le64(p + (n - 1) * record_size + 8);
    size_t k = (n + L - 1) / L;
    if (lw->max_leaves - lw->nleaves < k) return LT_ERR_ARG;
    int st = lt_merkle_leaves(p, record_size, n, L | lw->hash, lw->leaves + 32 * lw->nleaves,
                              32 * k);
    lw->nleaves += k, lw->tallied += n;
    return st;
}

static int stage_flush(leaf_walk *lw, size_t record_size, lt_rec_info *info) {
    int st = walk_leaves(lw, lw->stage, lw->fill, record_size, info);
    lw->fill = 0;
    return st;
}

static int stage_block(leaf_walk *lw, rec_src *s, uint64_t pos, size_t count, size_t record_size,
                       lt_rec_info *info) {
    /* A file read into the window: runs of whole leaves (lane_leaves at least, the hash's lanes)
     * that start on a leaf boundary in one block are checked and hashed where they were read (the
     * window is as private a copy as the stage); the rest is staged. */
    size_t run = lane_leaves(lw->leaf_records, record_size) * lw->leaf_records,
           most = SRC_WINDOW / record_size / run * run;
    while (count) {
        if (!s->mem && !lw->fill && count >= run && most) {
            size_t n = count / run * run < most ? count / run * run : most;
            const uint8_t *p = NULL;
            int st = src_view(s, pos, n * record_size, &p, info);
            if (st == LT_OK) st = walk_leaves(lw, p, n, record_size, info);
            if (st != LT_OK) return st;
            pos += n * record_size, count -= n;
            continue;
        }
        size_t take = lw->cap - lw->fill < count ? lw->cap - lw->fill : count;
        int st = src_copy(s, pos, lw->stage + lw->fill * record_size, take * record_size, info);
        if (st != LT_OK) return st;
        lw->fill += take, pos += take * record_size, count -= take;
        if (lw->fill == lw->cap) {
            /* the caller's bytes the next stage copies (and a block's framing), from memory while
             * this one is hashed: a prefetch is a hint, it never faults, and it stops at the end */
            size_t ahead = lw->cap * record_size + 64, left = (size_t)(s->len - pos);
            for (size_t k = 0; s->mem && k < (ahead < left ? ahead : left); k += 64)
                __builtin_prefetch(s->mem + pos + k);
            st = stage_flush(lw, record_size, info);
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
    size_t hash;                 /* 0 or LT_LEAF_BLAKE3 */
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
    uint16_t *ids; /* NULL: none; else each record's part, indexed as out */
} copy_leaves;

static int copy_leaves_upto(copy_leaves *cl, const uint8_t *out, size_t record_size, size_t records, int last) {
    size_t upto = last ? records : records / cl->leaf_records * cl->leaf_records;
    if (upto <= cl->hashed) return LT_OK;
    size_t done = cl->hashed / cl->leaf_records; /* (hashed is a whole number of leaves) */
    if (cl->leaves_len / 32 < done) return LT_ERR_ARG;
    const uint8_t *from = out + cl->hashed * record_size;
    size_t n = upto - cl->hashed;
    int st = lt_merkle_leaves(from, record_size, n, cl->leaf_records | cl->hash,
                              cl->leaves + 32 * done,
                              cl->leaves_len - 32 * done);
    if (st == LT_OK && cl->mkey) { /* the bytes just hashed, still in cache */
        st = cl->ids ? lt_mset_add_parts_ids(cl->mkey, cl->part_key, cl->part_bits, from, n, record_size,
                                             LT_RECORD_FIXED, record_size - LT_RECORD_FIXED, LT_FLAG_GAP, 0, cl->acc,
                                             cl->mcount, cl->ids + cl->hashed, NULL)
                     : lt_mset_add_parts(cl->mkey, cl->part_key, cl->part_bits, from, n, record_size, LT_RECORD_FIXED,
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
static int rec_walk(rec_src *s, size_t record_size, uint64_t first_seq, uint8_t *out,
                    size_t out_len, leaf_walk *lw, copy_leaves *cl, lt_rec_info *info) {
    uint64_t len = s->len;
    memset(info, 0, sizeof *info);
    info->seq_contiguous = 1;
    if (len < LT_REC_HEADER_SIZE) return fail(info, LT_REC_HEADER_CUT, len, 0);
    uint64_t pos = LT_REC_HEADER_SIZE;
    size_t used = 0;
    while (pos < len) {
        if (len - pos < 4) return fail(info, LT_REC_TRAILING, pos, 0);
        uint32_t count;
        int st = src_le32(s, pos, &count, info);
        if (st != LT_OK) return st;
        if (count < 1 || count > LT_REC_MAX_BLOCK_RECORDS) return fail(info, LT_REC_BAD_COUNT, pos, count);
        size_t body = (size_t)count * record_size;
        if (len - pos - 4 < body + LT_REC_MAC_SIZE) return fail(info, LT_REC_BLOCK_CUT, pos, count);
        if (!lw) {
            if (out_len - used < body) return LT_ERR_ARG;
            st = src_copy(s, pos + 4, out + used, body, info);
            if (st != LT_OK) return st;
            const uint8_t *rec = out + used; /* everything below reads the copy */
            tally(rec, count, record_size, first_seq + info->records, info);
            if (!info->records) info->first_ts_ns = (int64_t)lt_load_le64(rec + 8);
            info->last_ts_ns = (int64_t)lt_load_le64(rec + body - record_size + 8);
        } else {
            /* the tally and leaves of the stage (or of the read window) */
            st = stage_block(lw, s, pos + 4, count, record_size, info);
            if (st != LT_OK) return st;
        }
        used += body;
        info->records += count;
        info->blocks++;
        pos += 4 + body + LT_REC_MAC_SIZE;
        if (cl) {
            st = copy_leaves_upto(cl, out, record_size, info->records, 0);
            if (st != LT_OK) return st;
        }
    }
    if (lw) return stage_flush(lw, record_size, info);
    return cl ? copy_leaves_upto(cl, out, record_size, info->records, 1) : LT_OK;
}

/* A leaf_records argument's construction flag, split off where the call starts (ledgertool.h). */
#define SPLIT_LEAF_HASH(leaf_records, hash)                                                  \
    const size_t hash = (leaf_records) & LT_LEAF_BLAKE3;                                    \
    leaf_records &= ~(size_t)LT_LEAF_BLAKE3

static int leaves_args_ok(size_t record_size, const uint8_t *leaves, size_t leaf_records) {
    return (record_size == LT_RECORD_FIXED + 16 || record_size == LT_RECORD_FIXED + 32) && leaves && leaf_records &&
           leaf_records <= LT_MERKLE_MAX_LEAF_RECORDS && !(leaf_records & (leaf_records - 1));
}

int lt_rec_records(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, uint8_t *out,
                   size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    if (!info || (len && !file) || (record_size != LT_RECORD_FIXED + 16 && record_size != LT_RECORD_FIXED + 32) ||
        (out_len && !out))
        return LT_ERR_ARG;
    SPLIT_LEAF_HASH(leaf_records, hash);
    if (leaves && !leaves_args_ok(record_size, leaves, leaf_records)) return LT_ERR_ARG;
    copy_leaves cl = {.leaf_records = leaf_records, .hash = hash, .leaves = leaves,
                      .leaves_len = leaves_len};
    rec_src s = {.mem = file, .len = len};
    return rec_walk(&s, record_size, first_seq, out, out_len, NULL, leaves ? &cl : NULL, info);
}

/* The staged walk with a stage the caller allocated. */
static int leaves_walk(rec_src *s, size_t record_size, uint64_t first_seq, uint8_t *stage,
                       size_t leaf_records, size_t hash, uint8_t *leaves, size_t leaves_len,
                       lt_rec_info *info) {
    leaf_walk lw = {.stage = stage, .leaves = leaves, .leaf_records = leaf_records, .hash = hash,
                    .cap = stage_records(leaf_records, record_size), .max_leaves = leaves_len / 32, .first_seq = first_seq};
    return rec_walk(s, record_size, first_seq, NULL, 0, &lw, NULL, info);
}

int lt_rec_leaves(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, size_t leaf_records,
                  uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    SPLIT_LEAF_HASH(leaf_records, hash);
    if (!info || (len && !file) || !leaves_args_ok(record_size, leaves, leaf_records)) return LT_ERR_ARG;
    uint8_t *stage = malloc(stage_records(leaf_records, record_size) * record_size);
    if (!stage) return LT_ERR_NOMEM;
    rec_src s = {.mem = file, .len = len};
    int st = leaves_walk(&s, record_size, first_seq, stage, leaf_records, hash, leaves, leaves_len,
                         info);
    free(stage);
    return st;
}

/* The walks over the open file, read by pread(2) into the copy or the stage (rec_src): no map, so
 * neither a page the disk cannot read (EIO) nor a file truncated meanwhile can stop the process
 * (MAP_POPULATE over an unreadable page never returned; a read past a truncated map's end is
 * SIGBUS): each is an error naming the byte. */
static int rec_file(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                    size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, copy_leaves *cl,
                    lt_rec_info *info);

int lt_rec_file(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info) {
    SPLIT_LEAF_HASH(leaf_records, hash);
    copy_leaves cl = {.leaf_records = leaf_records, .hash = hash, .leaves = leaves,
                      .leaves_len = leaves_len};
    return rec_file(fd, len, record_size, first_seq, header, out, out_len, leaf_records, leaves, leaves_len, &cl, info);
}

int lt_rec_file_mset(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                     size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, const uint8_t key[16],
                     const uint64_t part_key[2], unsigned part_bits, uint64_t *acc, uint64_t *count, int64_t *secs,
                     uint64_t *counts, size_t cap, size_t *nruns, uint16_t *ids, lt_rec_info *info) {
    if (!out || !leaves || !key || !acc || !count || !nruns || (cap && (!secs || !counts)) ||
        (part_bits && !part_key) || part_bits > LT_MSET_MAX_PART_BITS || (ids && (part_bits == 0 || part_bits > 16)))
        return LT_ERR_ARG;
    SPLIT_LEAF_HASH(leaf_records, hash);
    copy_leaves cl = {.leaf_records = leaf_records, .hash = hash, .leaves = leaves,
                      .leaves_len = leaves_len, .mkey = key,
                      .part_key = part_key, .part_bits = part_bits, .acc = acc, .mcount = count, .secs = secs, .counts = counts, .cap = cap, .ids = ids};
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
    if (out && leaves && !leaves_args_ok(record_size, leaves, leaf_records)) return LT_ERR_ARG;
    uint8_t *stage = out ? NULL : malloc(stage_records(leaf_records, record_size) * record_size);
    rec_src s = {.fd = fd, .len = len, .win = malloc(SRC_WINDOW)};
    int st = LT_ERR_NOMEM;
    if ((out || stage) && s.win) {
        /* through the window, which then holds the first count */
        st = src_copy(&s, 0, header, LT_REC_HEADER_SIZE, info);
        if (st == LT_OK && out) /* the leaves hashed from the copy, block by block */
            st = rec_walk(&s, record_size, first_seq, out, out_len, NULL, leaves ? cl : NULL, info);
        else if (st == LT_OK)
            st = leaves_walk(&s, record_size, first_seq, stage, leaf_records, cl->hash, leaves,
                             leaves_len, info);
    }
    int saved = errno;
    free(stage);
    free(s.win);
    errno = saved; /* a failed read's (LT_REC_READ) */
    return st;
}

int lt_rec_from_columns(size_t n, size_t digest_size, uint64_t first_seq, const uint64_t *seq,
                        const int64_t *ts_ns, const uint32_t *wire_len, const uint32_t *cap_len,
                        const uint16_t *flags, const uint16_t *linktype, const uint32_t *aux,
                        const uint8_t *digest, uint8_t *out, size_t out_len, lt_rec_info *info) {
    const size_t rs = LT_RECORD_FIXED + digest_size;
    const int missing = !seq || !ts_ns || !wire_len || !cap_len || !flags || !linktype || !aux ||
                        !digest || !out;
    if (!info || (n && missing) || n > out_len / (rs ? rs : 1)) return LT_ERR_ARG;
    memset(info, 0, sizeof *info);
    uint64_t gaps = 0, drops = 0;
    int contiguous = 1;
    for (size_t i = 0; i < n; i++) {
        uint8_t *r = out + i * rs;
        lt_store_le64(r, seq[i]);
        lt_store_le64(r + 8, (uint64_t)ts_ns[i]);
        lt_store_le32(r + 16, wire_len[i]);
        lt_store_le32(r + 20, cap_len[i]);
        lt_store_le16(r + 24, flags[i]);
        lt_store_le16(r + 26, linktype[i]);
        lt_store_le32(r + 28, aux[i]);
        memcpy(r + LT_RECORD_FIXED, digest + i * digest_size, digest_size);
        contiguous &= seq[i] == first_seq + i;
        if (flags[i] & LT_FLAG_GAP) {
            gaps++;
            drops += aux[i];
        }
    }
    info->records = n;
    info->gaps = gaps;
    info->drops = drops;
    info->first_ts_ns = n ? ts_ns[0] : 0;
    info->last_ts_ns = n ? ts_ns[n - 1] : 0;
    info->seq_contiguous = contiguous;
    return LT_OK;
}

int lt_pread_records(int fd, const uint64_t *offsets, size_t n, size_t record_size, uint8_t *out, size_t *done) {
    if (!done || (n && (!offsets || !out)) || fd < 0 || record_size == 0 || record_size > 4096)
        return LT_ERR_ARG;
    *done = 0;
    for (size_t i = 0; i < n; i++) {
        size_t got = 0;
        while (got < record_size) {
            ssize_t r = pread(fd, out + i * record_size + got, record_size - got, (off_t)(offsets[i] + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                if (r == 0)
                    errno = 0;
                return LT_ERR_IO;
            }
            got += (size_t)r;
        }
        *done = i + 1;
    }
    return LT_OK;
}
