/*
 * libFuzzer harness: engine (native/src/engine.c) over the capture reader: reader -> strip ->
 * digest -> records, for the ledger algorithms (siphash-1-3-128, siphash-2-4-128, aes-128-gmac,
 * blake3-keyed-128, blake3-keyed-256, hmac-sha256-128) and the strip modes.
 *
 * Input: the bytes of a capture file. Its first byte also picks the engine batch size (1..32), its
 * second the records per lt_engine_fill call (1..32), so batch boundaries and partial fills are
 * fuzzed too; its third the (algorithm, strip) pair of this run (low nibble: algorithm, high
 * nibble: strip), and its fourth whether the run is repeated with 2 workers (1 input in 8).
 * One pair per input, not all 24: the fuzzer reaches every pair through those bytes, and an input
 * costs one engine run instead of 24 (about 70 inputs/s before, >1,000 now; docs/fuzzing.md).
 *
 * Checks, differentially: a second, independent reader on the same bytes supplies the reference
 * frames, and every record must equal what the public per-frame API gives for that frame:
 * seq, ts_ns, wire_len, caplen, flags (TRUNCATED / NO_TIMESTAMP / CAPLEN_GT_SNAPLEN + lt_strip's
 * flags), linktype, interface id, and a digest equal to the portable C path's (lt_digest_many
 * with the path forced to "portable": one key set-up, one message at a time), where the engine
 * runs on the best CPU path, multi-buffer where it has one. The engine must end with the same status
 * as the reference reader, with exactly as many records as it had frames. The 2-worker run must
 * give identical records (read-ahead and the pool).
 */
#include "fuzz_common.h"

static const int algorithms[] = {LT_ALG_SIPHASH_1_3_128, LT_ALG_SIPHASH_2_4_128, LT_ALG_AES_128_GMAC,
                                 LT_ALG_BLAKE3_KEYED_128, LT_ALG_BLAKE3_KEYED_256, LT_ALG_HMAC_SHA256_128};
#define NALG (sizeof algorithms / sizeof algorithms[0])
#define MAX_FILL 32
#define REF_BATCH 256

static uint8_t key[64];

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* All records of one engine run into a malloc'd buffer; returns the final status. */
static int run_engine(const char *path, int alg, int strip, uint32_t batch, uint32_t workers, size_t fill,
                      uint8_t **recs_out, size_t *nrec_out) {
    char err[256];
    lt_reader *r = NULL;
    int st = lt_reader_open(path, &r, err, sizeof err);
    FUZZ_CHECK(st == LT_OK, "second open failed: %d %s", st, err);
    lt_engine_config cfg = {alg, strip, key, lt_key_size(alg), batch, workers};
    lt_engine *e = NULL;
    st = lt_engine_new(r, &cfg, &e, err, sizeof err);
    FUZZ_CHECK(st == LT_OK, "engine_new alg %d strip %d: %d %s", alg, strip, st, err);
    const size_t rs = lt_record_size(alg);
    size_t cap = 64, nrec = 0;
    uint8_t *recs = malloc(cap * rs);
    uint64_t seq = 1000;
    for (;;) {
        if (nrec + fill > cap) {
            cap = 2 * (nrec + fill);
            recs = realloc(recs, cap * rs);
            FUZZ_CHECK(recs != NULL, "realloc");
        }
        size_t n = 777;
        uint64_t bytes = 0;
        st = lt_engine_fill(e, seq + nrec, recs + nrec * rs, fill, &n, &bytes);
        FUZZ_CHECK(fuzz_known_status(st), "fill status %d", st);
        if (st != LT_OK) {
            FUZZ_CHECK(n == 0, "fill status %d with %zu records", st, n);
            break;
        }
        FUZZ_CHECK(n >= 1 && n <= fill, "fill LT_OK with %zu records (max %zu)", n, fill);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++) sum += le32(recs + (nrec + i) * rs + 20);
        FUZZ_CHECK(bytes == sum, "bytes_captured %llu != caplen sum %llu", (unsigned long long)bytes,
                   (unsigned long long)sum);
        nrec += n;
    }
    lt_engine_free(e);
    lt_reader_close(r);
    *recs_out = recs;
    *nrec_out = nrec;
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!key[0])
        for (size_t i = 0; i < sizeof key; i++) key[i] = (uint8_t)(0xA5 ^ (i * 37 + 1));
    char path[64], err[256];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0) return 0;
    lt_reader *ref = NULL;
    if (lt_reader_open(path, &ref, err, sizeof err) != LT_OK) {
        close(fd);
        return 0;
    }
    /* Reference frames: all of them (they point into ref's map, valid until it is closed). */
    size_t nf = 0, capf = REF_BATCH;
    lt_frame *frames = malloc(capf * sizeof *frames);
    int ref_st;
    for (;;) {
        if (nf + REF_BATCH > capf) {
            capf *= 2;
            frames = realloc(frames, capf * sizeof *frames);
            FUZZ_CHECK(frames != NULL, "realloc");
        }
        size_t n = 0;
        ref_st = lt_reader_next(ref, frames + nf, REF_BATCH, &n);
        if (ref_st != LT_OK) break;
        nf += n;
    }
    const uint32_t batch = size ? (uint32_t)(data[0] % 32) + 1 : 1;
    const size_t fill = size > 1 ? (size_t)(data[1] % MAX_FILL) + 1 : MAX_FILL;
    const int alg = algorithms[(size > 2 ? data[2] & 15 : 0) % NALG];
    const int strip = LT_STRIP_FRAME + (size > 2 ? data[2] >> 4 : 0) % 4;
    const int two_workers = size > 3 && data[3] % 8 == 0;
    const size_t rs = lt_record_size(alg), ds = lt_digest_size(alg);

    uint8_t *recs;
    size_t nrec;
    int st = run_engine(path, alg, strip, batch, 1, fill, &recs, &nrec);
    FUZZ_CHECK(st == ref_st, "alg %d strip %d: engine ended with %d, reader with %d", alg, strip, st, ref_st);
    FUZZ_CHECK(nrec == nf, "alg %d strip %d: %zu records for %zu frames", alg, strip, nrec, nf);

    /* The expected fields and stripped ranges of every frame, then their digests on the portable
     * path in one call. */
    const uint8_t **msgs = malloc((nf ? nf : 1) * sizeof *msgs);
    uint32_t *lens = malloc((nf ? nf : 1) * sizeof *lens);
    uint16_t *flags = malloc((nf ? nf : 1) * sizeof *flags);
    uint8_t *want = malloc((nf ? nf : 1) * 32);
    FUZZ_CHECK(msgs && lens && flags && want, "malloc");
    for (size_t i = 0; i < nf; i++) {
        const lt_frame *f = &frames[i];
        uint32_t off = 0, len = f->caplen;
        uint16_t sfl = 0;
        FUZZ_CHECK(lt_strip(strip, f->linktype, f->data, f->caplen, f->wire_len, &off, &len, &sfl) == LT_OK,
                   "lt_strip");
        if (f->caplen < f->wire_len) sfl |= LT_FLAG_TRUNCATED;
        if (f->rflags & LT_RF_NO_TIMESTAMP) sfl |= LT_FLAG_NO_TIMESTAMP;
        if (f->rflags & LT_RF_CAPLEN_GT_SNAPLEN) sfl |= LT_FLAG_CAPLEN_GT_SNAPLEN;
        msgs[i] = f->data + off;
        lens[i] = len;
        flags[i] = sfl;
    }
    char engine_path[32];
    snprintf(engine_path, sizeof engine_path, "%s", lt_cpu_path(alg));
    FUZZ_CHECK(lt_cpu_path_force(alg, "portable") == LT_OK, "force portable alg %d", alg);
    FUZZ_CHECK(lt_digest_many(alg, key, msgs, lens, nf, want, 32) == LT_OK, "lt_digest_many alg %d", alg);
    FUZZ_CHECK(lt_cpu_path_force(alg, NULL) == LT_OK, "unforce alg %d", alg);
    for (size_t i = 0; i < nrec; i++) {
        const uint8_t *rec = recs + i * rs;
        const lt_frame *f = &frames[i];
        FUZZ_CHECK(le64(rec) == 1000 + i, "record %zu seq %llu", i, (unsigned long long)le64(rec));
        FUZZ_CHECK((int64_t)le64(rec + 8) == f->ts_ns, "record %zu ts", i);
        FUZZ_CHECK(le32(rec + 16) == f->wire_len, "record %zu wire_len", i);
        FUZZ_CHECK(le32(rec + 20) == f->caplen, "record %zu caplen", i);
        FUZZ_CHECK(le16(rec + 24) == flags[i], "record %zu flags 0x%x, expected 0x%x", i, le16(rec + 24), flags[i]);
        FUZZ_CHECK(le16(rec + 26) == (uint16_t)f->linktype, "record %zu linktype", i);
        FUZZ_CHECK(le32(rec + 28) == f->interface_id, "record %zu interface id", i);
        FUZZ_CHECK(memcmp(rec + LT_RECORD_FIXED, want + 32 * i, ds) == 0,
                   "record %zu (frame at byte %llu, %u bytes hashed): alg %d strip %d digest differs from the "
                   "portable path (engine path %s)",
                   i, (unsigned long long)f->offset, lens[i], alg, strip, engine_path);
    }
    if (two_workers) {  /* the pool and read-ahead must give the same records */
        uint8_t *recs2;
        size_t nrec2;
        int st2 = run_engine(path, alg, strip, 0, 2, (size_t)nf + 1, &recs2, &nrec2);
        FUZZ_CHECK(st2 == st && nrec2 == nrec, "2 workers: status %d/%d, %zu/%zu records", st2, st, nrec2, nrec);
        FUZZ_CHECK(nrec == 0 || memcmp(recs, recs2, nrec * rs) == 0, "2 workers: records differ");
        free(recs2);
    }
    free(recs);
    free(msgs);
    free(lens);
    free(flags);
    free(want);
    free(frames);
    lt_reader_close(ref);
    close(fd);
    return 0;
}
