/*
 * Native writer of open segments (docs/ledger-format.md, "Open segment file"; ADR 0009): the
 * records the engine just produced go from its buffer to the file once, and the segment's Merkle
 * leaves, the block MACs and the seal's counters are computed from that same memory, never from
 * bytes read back from storage.
 *
 * Blocks start at leaf boundaries of the segment: an append first completes a leaf the previous
 * append left open (a block of its own), then writes whole leaves (blocks of at most
 * LT_SEGMENT_MAX_BLOCK_RECORDS records, a multiple of every leaf size), then the rest as a short
 * block, so that every record is durable once append returns. The records of the open leaf are
 * kept here (at most leaf_records - 1) until it completes or the segment finishes. Each block's
 * MAC is HMAC-SHA-256 over its leaf-chunk hashes; for aligned blocks those are the segment's
 * leaves, so whole leaves are hashed once (lt_merkle_leaves) for both.
 *
 * Direct I/O (lt_segment_writer_direct): the file's bytes, the header first, are staged in 4 MiB
 * of 4 KiB-aligned memory and written in whole 4 KiB pages at 4 KiB-aligned offsets (what O_DIRECT
 * needs), STAGE_BYTES at a time; at the end of each append the staged rest goes out as one page
 * padded with zeros, rewritten with more bytes by the next write, so every record appended is
 * still in the file when append returns. lt_segment_writer_trim cuts the padding at close: the
 * closed file's bytes are those of the write(2) path.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ledgertool.h"
#include "lt_internal.h"
#include "sha256.h"

static const char MAC_LABEL[] = "ledgertool open-segment leaves v2"; /* + its NUL: the 0x00 separator */

/* Incremental SHA-256 over a message of any length (the HMAC input is label, chain and leaf hashes). */
typedef struct {
    sha256_blocks_fn blocks;
    uint32_t st[8];
    uint8_t buf[64];
    size_t fill;
    uint64_t total; /* bytes, including those compressed into the state before */
} sha_stream;

static void sha_stream_init(sha_stream *s, sha256_blocks_fn blocks, const uint32_t st[8], uint64_t prefix) {
    s->blocks = blocks;
    memcpy(s->st, st, 32);
    s->fill = 0;
    s->total = prefix;
}

static void sha_stream_update(sha_stream *s, const uint8_t *p, size_t n) {
    s->total += n;
    if (s->fill) {
        size_t take = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->buf + s->fill, p, take);
        s->fill += take, p += take, n -= take;
        if (s->fill < 64) return;
        s->blocks(s->st, s->buf, 1);
        s->fill = 0;
    }
    if (n >= 64) {
        s->blocks(s->st, p, n / 64);
        p += n / 64 * 64, n %= 64;
    }
    memcpy(s->buf, p, n);
    s->fill = n;
}

static void sha_stream_final(sha_stream *s, uint8_t out[32]) {
    sha256_finish(s->blocks, s->st, s->total - s->fill, s->buf, s->fill, out);
}

struct lt_segment_writer {
    int fd;
    int failed;                 /* sticky: an earlier write failed; the file's tail is torn */
    int io_failed;              /* a write(2) failed: the staged length is not the file's */
    uint8_t *stage;             /* direct I/O: file bytes from stage_off (STAGE_BYTES, aligned) */
    size_t stage_n;             /* bytes staged (< DIRECT_ALIGN after each append) */
    uint64_t stage_off;         /* file offset of stage[0], a multiple of DIRECT_ALIGN */
    sha256_blocks_fn blocks;
    uint32_t istate[8], ostate[8]; /* HMAC key pads, compressed once */
    uint8_t chain[32];          /* MAC of the last block written (C[i-1]) */
    size_t record_size, leaf_records;
    size_t hash; /* 0 or LT_LEAF_BLAKE3: the ledger's leaf construction */
    uint64_t max_records;
    uint8_t *tail;              /* records of the open leaf: leaf_records * record_size bytes */
    size_t tail_n;
    uint8_t *leaves;            /* the segment's whole leaves so far, 32 bytes each */
    size_t nleaves, cap_leaves;
    lt_segment_counters c;
};

static void hmac_pads(lt_segment_writer *w, const uint8_t *key, size_t key_len) {
    uint8_t k[64] = {0}, pad[64];
    if (key_len > 64) {
        uint32_t st[8];
        memcpy(st, SHA256_H0, sizeof st);
        sha256_finish(w->blocks, st, 0, key, key_len, k);
    } else {
        memcpy(k, key, key_len);
    }
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    memcpy(w->istate, SHA256_H0, 32);
    w->blocks(w->istate, pad, 1);
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    memcpy(w->ostate, SHA256_H0, 32);
    w->blocks(w->ostate, pad, 1);
    lt_wipe(k, sizeof k);
    lt_wipe(pad, sizeof pad);
}

/* MAC[i] = HMAC(K, label || 0x00 || C[i-1] || u64 i || u32 count || chunk hashes) into w->chain. */
static void block_mac(lt_segment_writer *w, uint32_t count, const uint8_t *chunks, size_t nchunks) {
    uint8_t fields[12], inner[32];
    lt_store_le64(fields, w->c.blocks);
    lt_store_le32(fields + 8, count);
    sha_stream s;
    sha_stream_init(&s, w->blocks, w->istate, 64);
    sha_stream_update(&s, (const uint8_t *)MAC_LABEL, sizeof MAC_LABEL);
    sha_stream_update(&s, w->chain, 32);
    sha_stream_update(&s, fields, sizeof fields);
    sha_stream_update(&s, chunks, 32 * nchunks);
    sha_stream_final(&s, inner);
    sha_stream_init(&s, w->blocks, w->ostate, 64);
    sha_stream_update(&s, inner, 32);
    sha_stream_final(&s, w->chain);
}

/* write(2) all of iov, retrying short writes and EINTR; 0 or the errno. */
static int write_all(int fd, struct iovec *iov, int n) {
    while (n) {
        ssize_t got = writev(fd, iov, n);
        if (got < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        size_t left = (size_t)got;
        while (n && left >= iov->iov_len) left -= iov->iov_len, iov++, n--;
        if (n) iov->iov_base = (uint8_t *)iov->iov_base + left, iov->iov_len -= left;
    }
    return 0;
}

#define DIRECT_ALIGN ((size_t)4096)
/* A multiple of DIRECT_ALIGN. The kernel's cost of a direct write is mostly per call (pinning,
 * the extent, the bio): of 48-byte records' worth, ext4 took 5.6 ns each in 256 KiB writes, 1.8
 * in 4 MiB ones (13 through the page cache). An append of 65,536 such records is 3 MiB. */
#define STAGE_BYTES ((size_t)4 << 20)

/* pwrite(2) all of n bytes at off, retrying short writes and EINTR; 0 or the errno. EINVAL with
 * O_DIRECT set (a file system that takes the flag but not this I/O) clears O_DIRECT and retries:
 * the same bytes then go through the page cache. */
static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off) {
    while (n) {
        ssize_t got = pwrite(fd, p, n, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            int e = errno, fl = e == EINVAL ? fcntl(fd, F_GETFL) : -1;
            if (fl >= 0 && (fl & O_DIRECT) && fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0) continue;
            return e;
        }
        p += got, n -= (size_t)got, off += (uint64_t)got;
    }
    return 0;
}

/* Direct I/O: the staged bytes go out in whole pages, the last one padded with zeros; the
 * partial page stays staged (at stage[0]) for the next write to complete. */
static int stage_flush(lt_segment_writer *w) {
    if (!w->stage_n) return 0;
    size_t whole = w->stage_n & ~(DIRECT_ALIGN - 1);
    size_t padded = (w->stage_n + DIRECT_ALIGN - 1) & ~(DIRECT_ALIGN - 1);
    memset(w->stage + w->stage_n, 0, padded - w->stage_n);
    int e = pwrite_all(w->fd, w->stage, padded, w->stage_off);
    if (e) return e;
    if (whole) {
        memmove(w->stage, w->stage + whole, w->stage_n - whole);
        w->stage_off += whole;
        w->stage_n -= whole;
    }
    return 0;
}

/* The bytes of iov, next in the file: written (write_all) or, for direct I/O, staged and written
 * STAGE_BYTES at a time. 0 or the errno. */
static int emit(lt_segment_writer *w, struct iovec *iov, int n) {
    if (!w->stage) return write_all(w->fd, iov, n);
    for (int i = 0; i < n; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t len = iov[i].iov_len;
        while (len) {
            size_t take = STAGE_BYTES - w->stage_n < len ? STAGE_BYTES - w->stage_n : len;
            memcpy(w->stage + w->stage_n, p, take);
            w->stage_n += take, p += take, len -= take;
            if (w->stage_n == STAGE_BYTES) {
                int e = pwrite_all(w->fd, w->stage, STAGE_BYTES, w->stage_off);
                if (e) return e;
                w->stage_off += STAGE_BYTES;
                w->stage_n = 0;
            }
        }
    }
    return 0;
}

/* Frame, MAC and write one block of `count` records whose chunk hashes are `chunks`. */
static int write_block(lt_segment_writer *w, const uint8_t *records, size_t count, const uint8_t *chunks,
                       size_t nchunks, int *os_errno) {
    uint8_t prefix[4];
    lt_store_le32(prefix, (uint32_t)count);
    block_mac(w, (uint32_t)count, chunks, nchunks);
    struct iovec iov[3] = {{prefix, 4}, {(void *)records, count * w->record_size}, {w->chain, 32}};
    int e = emit(w, iov, 3);
    if (e) {
        w->failed = w->io_failed = 1;
        *os_errno = e;
        return LT_ERR_IO;
    }
    w->c.blocks++;
    w->c.file_bytes += 4 + count * w->record_size + 32;
    return LT_OK;
}

/* A block of whole leaves is counted, hashed and written piece by piece, each piece about
 * PIECE_BYTES: it is then read from the engine's buffer into this core's L2 once and hashed and
 * copied to the file from there, not streamed from L3 three times (counters, leaves, write(2)).
 * A piece is a multiple of 16 leaves where it holds that many (the leaf hashing's AVX-512 lanes),
 * else of 4 (its SHA-NI streams). The block's bytes are the same; the MAC, which needs all its
 * leaves, goes with the last piece. */
#define PIECE_BYTES ((size_t)256 << 10)

static void count_records(lt_segment_counters *c, const uint8_t *p, size_t n, size_t size);

/* Frame, count, hash and write one block of `count` whole leaves of records (see PIECE_BYTES); its
 * leaf hashes go to `leaves` (room for count / leaf_records of them). */
static int write_leaf_block(lt_segment_writer *w, const uint8_t *records, size_t count, uint8_t *leaves,
                            int *os_errno) {
    const size_t rs = w->record_size, L = w->leaf_records;
    size_t piece_leaves = PIECE_BYTES / (L * rs);
    piece_leaves = piece_leaves >= 16 ? piece_leaves / 16 * 16 : piece_leaves / 4 * 4;
    const size_t piece = (piece_leaves ? piece_leaves : 4) * L;
    uint8_t prefix[4];
    lt_store_le32(prefix, (uint32_t)count);
    for (size_t done = 0; done < count;) {
        size_t m = count - done < piece ? count - done : piece;
        const uint8_t *p = records + done * rs;
        count_records(&w->c, p, m, rs);
        int st = lt_merkle_leaves(p, rs, m, L | w->hash, leaves + 32 * (done / L),
                                  32 * ((count - done) / L));
        if (st != LT_OK) return st;
        struct iovec iov[3];
        int k = 0;
        if (!done) iov[k].iov_base = prefix, iov[k++].iov_len = 4;
        iov[k].iov_base = (void *)p, iov[k++].iov_len = m * rs;
        done += m;
        if (done == count) {
            block_mac(w, (uint32_t)count, leaves, count / L);
            iov[k].iov_base = w->chain, iov[k++].iov_len = 32;
        }
        int e = emit(w, iov, k);
        if (e) {
            w->failed = w->io_failed = 1;
            *os_errno = e;
            return LT_ERR_IO;
        }
    }
    w->c.blocks++;
    w->c.file_bytes += 4 + count * rs + 32;
    return LT_OK;
}

static int leaves_reserve(lt_segment_writer *w, size_t more) {
    if (w->nleaves + more <= w->cap_leaves) return LT_OK;
    size_t cap = w->cap_leaves ? w->cap_leaves : 64;
    while (cap < w->nleaves + more) cap *= 2; /* nleaves + more <= max_records: bounded, no wrap */
    uint8_t *p = realloc(w->leaves, cap * 32);
    if (!p) return LT_ERR_NOMEM;
    w->leaves = p;
    w->cap_leaves = cap;
    return LT_OK;
}

static void count_records(lt_segment_counters *c, const uint8_t *p, size_t n, size_t size) {
    if (!n) return;
    if (!c->records) {
        c->first_seq = lt_load_le64(p);
        c->first_ts_ns = (int64_t)lt_load_le64(p + 8);
    }
    for (size_t i = 0; i < n; i++, p += size) {
        if (lt_load_le16(p + 24) & LT_FLAG_GAP)
            c->drops += lt_load_le32(p + 28);
        else
            c->frames++;
    }
    p -= size;
    c->last_seq = lt_load_le64(p);
    c->last_ts_ns = (int64_t)lt_load_le64(p + 8);
    c->records += n;
}

int lt_segment_writer_new(int fd, const uint8_t *key, size_t key_len, const uint8_t chain[32], size_t record_size,
                          size_t leaf_records, uint64_t max_records, lt_segment_writer **out) {
    if (!out) return LT_ERR_ARG;
    *out = NULL;
    const size_t hash = leaf_records & LT_LEAF_BLAKE3;
    leaf_records &= ~(size_t)LT_LEAF_BLAKE3;
    if (fd < 0 || !key || !key_len || !chain || !lt_segment_record_ok(record_size, leaf_records) || !leaf_records || leaf_records > LT_MERKLE_MAX_LEAF_RECORDS ||
        (leaf_records & (leaf_records - 1)) || !max_records || max_records > LT_SEGMENT_MAX_RECORDS)
        return LT_ERR_ARG;
    lt_segment_writer *w = calloc(1, sizeof *w);
    if (!w) return LT_ERR_NOMEM;
    w->tail = malloc(leaf_records * record_size); /* <= 2^16 * 64 bytes */
    if (!w->tail) {
        free(w);
        return LT_ERR_NOMEM;
    }
    w->fd = fd;
    w->blocks = sha256_blocks_portable;
#if LT_X86_PATHS
    if (strcmp(lt_cpu_path(LT_ALG_HMAC_SHA256_128), "sha-ni") == 0) w->blocks = sha256_blocks_shani;
#endif
    hmac_pads(w, key, key_len);
    memcpy(w->chain, chain, 32);
    w->record_size = record_size;
    w->leaf_records = leaf_records;
    w->hash = hash;
    w->max_records = max_records;
    *out = w;
    return LT_OK;
}

/* The ledger's leaf over n <= leaf_records records at p (a whole leaf, the last shorter one, or
 * the chunk of a block that extends the open leaf). */
static void leaf_of(const lt_segment_writer *w, const uint8_t *p, size_t n, uint8_t out[32]) {
    if (!w->hash) {
        sha256_leaf(w->blocks, p, n * w->record_size, out);
        return;
    }
    /* the arguments were checked when the writer was made */
    (void)lt_merkle_leaves(p, w->record_size, n, w->leaf_records | w->hash, out, 32);
}

/* The open leaf gets `n` records from `p`: written as one block (chunk hash over just these
 * records), kept in the tail; a completed leaf joins the segment's leaves. */
static int append_to_open_leaf(lt_segment_writer *w, const uint8_t *p, size_t n, int *os_errno) {
    uint8_t chunk[32];
    size_t rs = w->record_size;
    count_records(&w->c, p, n, rs);
    leaf_of(w, p, n, chunk);
    int st = write_block(w, p, n, chunk, 1, os_errno);
    if (st != LT_OK) return st;
    memcpy(w->tail + w->tail_n * rs, p, n * rs);
    w->tail_n += n;
    if (w->tail_n == w->leaf_records) {
        if ((st = leaves_reserve(w, 1)) != LT_OK) return st;
        leaf_of(w, w->tail, w->leaf_records, w->leaves + 32 * w->nleaves);
        w->nleaves++;
        w->tail_n = 0;
    }
    return LT_OK;
}

static int append_blocks(lt_segment_writer *w, const uint8_t *records, size_t count, int *os_errno) {
    const size_t rs = w->record_size, L = w->leaf_records;
    int st;
    if (w->tail_n && count) {
        size_t n = L - w->tail_n < count ? L - w->tail_n : count;
        if ((st = append_to_open_leaf(w, records, n, os_errno)) != LT_OK) return st;
        records += n * rs, count -= n;
    }
    while (count >= L) {
        size_t n = count / L * L;
        if (n > LT_SEGMENT_MAX_BLOCK_RECORDS) n = LT_SEGMENT_MAX_BLOCK_RECORDS; /* a multiple of L */
        if ((st = leaves_reserve(w, n / L)) != LT_OK) return st;
        if ((st = write_leaf_block(w, records, n, w->leaves + 32 * w->nleaves, os_errno)) != LT_OK) return st;
        w->nleaves += n / L;
        records += n * rs, count -= n;
    }
    if (count) return append_to_open_leaf(w, records, count, os_errno);
    return LT_OK;
}

int lt_segment_writer_append(lt_segment_writer *w, const uint8_t *records, size_t count, int *os_errno) {
    if (!w || !os_errno || (count && !records)) return LT_ERR_ARG;
    *os_errno = 0;
    if (w->failed) return LT_ERR_IO; /* the file may end in a torn block: nothing may follow it */
    if (count > w->max_records - w->c.records) return LT_ERR_ARG; /* also bounds count * record_size */
    int st = append_blocks(w, records, count, os_errno); /* counts the records as it writes them */
    if (st == LT_OK && w->stage && (*os_errno = stage_flush(w)) != 0)
        st = LT_ERR_IO, w->io_failed = 1; /* the staged rest (padded) is the append's last write */
    if (st != LT_OK) w->failed = 1; /* the counters and leaves no longer match the file */
    return st;
}

int lt_segment_writer_direct(lt_segment_writer *w, const uint8_t *head, size_t head_len,
                             int *os_errno) {
    if (!w || !os_errno || (head_len && !head) || head_len > STAGE_BYTES || w->stage || w->failed ||
        w->c.records)
        return LT_ERR_ARG;
    *os_errno = 0;
    void *p = NULL;
    if (posix_memalign(&p, DIRECT_ALIGN, STAGE_BYTES)) return LT_ERR_NOMEM;
    w->stage = p;
    memcpy(w->stage, head, head_len);
    w->stage_n = head_len;
    w->stage_off = 0;
    if ((*os_errno = stage_flush(w)) != 0) {
        w->failed = w->io_failed = 1;
        return LT_ERR_IO;
    }
    return LT_OK;
}

int lt_segment_writer_trim(lt_segment_writer *w, int *os_errno) {
    if (!w || !os_errno) return LT_ERR_ARG;
    *os_errno = 0;
    if (!w->stage || w->io_failed) return LT_OK; /* after a failed write the tail stays as it is */
    while (ftruncate(w->fd, (off_t)(w->stage_off + w->stage_n)) != 0) {
        if (errno == EINTR) continue;
        *os_errno = errno;
        return LT_ERR_IO;
    }
    return LT_OK;
}

int lt_segment_writer_finish(lt_segment_writer *w, uint8_t root[32], uint8_t last_leaf[32],
                             lt_segment_counters *counters) {
    if (!w || !root || !last_leaf || !counters || w->failed || !w->c.records) return LT_ERR_ARG;
    int st;
    if (w->tail_n) { /* the last, shorter leaf (its records are on disk already) */
        if ((st = leaves_reserve(w, 1)) != LT_OK) return st;
        leaf_of(w, w->tail, w->tail_n, w->leaves + 32 * w->nleaves);
        w->nleaves++;
        w->tail_n = 0;
    }
    if ((st = lt_merkle_root(w->leaves, w->nleaves, root)) != LT_OK) return st;
    memcpy(last_leaf, w->leaves + 32 * (w->nleaves - 1), 32);
    *counters = w->c;
    counters->leaves = w->nleaves;
    w->failed = 1; /* finished: no more appends */
    return LT_OK;
}

int lt_segment_writer_leaves(const lt_segment_writer *w, uint8_t *out, size_t out_len) {
    if (!w || !out || out_len / 32 < w->nleaves) return LT_ERR_ARG;
    memcpy(out, w->leaves, 32 * w->nleaves);
    return LT_OK;
}

void lt_segment_writer_free(lt_segment_writer *w) {
    if (!w) return;
    lt_wipe(w->istate, sizeof w->istate);
    lt_wipe(w->ostate, sizeof w->ostate);
    free(w->tail);
    free(w->leaves);
    free(w->stage);
    free(w);
}
