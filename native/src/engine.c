/*
 * The hot path: frames from a reader -> strip -> keyed digest -> fixed-size records in a
 * caller-owned buffer. One call handles a whole batch; nothing is allocated per frame.
 *
 * Record layout (little-endian, LT_RECORD_FIXED + digest bytes; docs/ledger-format.md):
 *   0 u64 seq | 8 i64 ts_ns | 16 u32 wire_len | 20 u32 cap_len | 24 u16 flags | 26 u16 linktype
 *  28 u32 aux (interface id; dropped-frame count for GAP records) | 32 digest
 */
#include <stdlib.h>

#include "ledgertool.h"
#include "lt_internal.h"

#define LT_BATCH 256

struct lt_engine {
    lt_reader *reader;
    int algorithm;
    int strip;
    size_t digest_size;
    size_t record_size;
    lt_dctx dctx;           /* keyed once; its CPU path is fixed for the engine's life */
    lt_frame batch[LT_BATCH];
    size_t batch_len; /* frames in batch */
    size_t batch_pos; /* next frame to digest */
    int reader_status; /* last non-OK status from the reader (LT_EOF or an error), 0 while reading */
};

int lt_engine_new(lt_reader *r, const lt_engine_config *cfg, lt_engine **out, char *err, size_t errlen) {
    *out = NULL;
    size_t ks = lt_key_size(cfg->algorithm), ds = lt_digest_size(cfg->algorithm);
    if (!ks) {
        lt_errf(err, errlen, "unknown algorithm id %d", cfg->algorithm);
        return LT_ERR_ARG;
    }
    if (ds < 16) {
        lt_errf(err, errlen, "64-bit digests are for bench only: at 595 Mframes/s a 64-bit digest "
                             "collides after ~9 s (birthday bound)");
        return LT_ERR_ARG;
    }
    if (cfg->key_len != ks) {
        lt_errf(err, errlen, "key is %zu bytes, algorithm needs %zu", cfg->key_len, ks);
        return LT_ERR_ARG;
    }
    if (cfg->strip < LT_STRIP_FRAME || cfg->strip > LT_STRIP_RDMA) {
        lt_errf(err, errlen, "unsupported strip mode %d", cfg->strip);
        return LT_ERR_ARG;
    }
    lt_engine *e = calloc(1, sizeof *e);
    if (!e) return LT_ERR_NOMEM;
    e->reader = r;
    e->algorithm = cfg->algorithm;
    e->strip = cfg->strip;
    e->digest_size = ds;
    e->record_size = LT_RECORD_FIXED + ds;
    if (lt_dctx_init(&e->dctx, cfg->algorithm, cfg->key) != LT_OK) {
        free(e);
        lt_errf(err, errlen, "algorithm id %d has no usable CPU path", cfg->algorithm);
        return LT_ERR_ARG;
    }
    *out = e;
    return LT_OK;
}

static inline uint16_t record_flags(const lt_frame *f) {
    uint16_t fl = 0;
    if (f->caplen < f->wire_len) fl |= LT_FLAG_TRUNCATED;
    if (f->rflags & LT_RF_NO_TIMESTAMP) fl |= LT_FLAG_NO_TIMESTAMP;
    if (f->rflags & LT_RF_CAPLEN_GT_SNAPLEN) fl |= LT_FLAG_CAPLEN_GT_SNAPLEN;
    if (f->rflags & LT_RF_GAP) fl = LT_FLAG_GAP; /* live source: wire_len frames were dropped */
    return fl;
}

int lt_engine_fill(lt_engine *e, uint64_t first_seq, uint8_t *out, size_t max_records, size_t *n,
                   uint64_t *bytes_captured) {
    size_t done = 0;
    uint64_t bytes = 0;
    int idle = 0; /* a live source returned LT_OK with 0 frames: nothing arrived, not the end */
    *n = 0;
    while (done < max_records) {
        if (e->batch_pos == e->batch_len) {
            if (e->reader_status) break;
            size_t got = 0;
            int st = lt_reader_next(e->reader, e->batch, LT_BATCH, &got);
            e->batch_len = got;
            e->batch_pos = 0;
            if (st != LT_OK) e->reader_status = st;
            if (got == 0) {
                idle = st == LT_OK;
                break;
            }
        }
        size_t take = e->batch_len - e->batch_pos;
        if (take > max_records - done) take = max_records - done;
        const lt_frame *f = e->batch + e->batch_pos;
        uint8_t *rec = out + done * e->record_size;
        for (size_t i = 0; i < take; i++, f++, rec += e->record_size) {
            lt_store_le64(rec, first_seq + done + i);
            lt_store_le64(rec + 8, (uint64_t)f->ts_ns);
            lt_store_le32(rec + 16, f->wire_len);
            lt_store_le32(rec + 20, f->caplen);
            uint16_t fl = record_flags(f);
            if (f->rflags & LT_RF_GAP) { /* GAP record: aux = dropped frames, lengths and digest 0 */
                lt_store_le32(rec + 16, 0);
                lt_store_le16(rec + 24, fl);
                lt_store_le16(rec + 26, (uint16_t)f->linktype);
                lt_store_le32(rec + 28, f->wire_len);
                memset(rec + LT_RECORD_FIXED, 0, e->digest_size);
                continue;
            }
            uint32_t off = 0, len = f->caplen;
            /* `frame` hashes the captured bytes as stored; the others hash the range strip.c picks. */
            if (e->strip != LT_STRIP_FRAME)
                fl |= lt_strip_range(e->strip, f->linktype, f->data, f->caplen, f->wire_len, &off, &len);
            lt_store_le16(rec + 24, fl);
            lt_store_le16(rec + 26, (uint16_t)f->linktype);
            lt_store_le32(rec + 28, f->interface_id);
            lt_dctx_run(&e->dctx, f->data + off, len, rec + LT_RECORD_FIXED);
            bytes += f->caplen;
        }
        e->batch_pos += take;
        done += take;
    }
    *n = done;
    if (bytes_captured) *bytes_captured = bytes;
    if (done > 0 || idle) return LT_OK;
    return e->reader_status ? e->reader_status : LT_EOF;
}

void lt_engine_free(lt_engine *e) {
    if (!e) return;
    memset(&e->dctx, 0, sizeof e->dctx);  /* key material */
    free(e);
}
