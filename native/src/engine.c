/*
 * The hot path: frames from a reader -> strip -> keyed digest -> fixed-size records in a
 * caller-owned buffer. One call handles a whole batch; nothing is allocated per frame.
 *
 * Record layout (little-endian, LT_RECORD_FIXED + digest bytes; docs/ledger-format.md):
 *   0 u64 seq | 8 i64 ts_ns | 16 u32 wire_len | 20 u32 cap_len | 24 u16 flags | 26 u16 linktype
 *  28 u32 aux (interface id; dropped-frame count for GAP records) | 32 digest
 */
#include <pthread.h>
#include <stdlib.h>

#include "ledgertool.h"
#include "ledgertool_testing.h"
#include "lt_internal.h"
#include "clock.h"

/* Below this many frames a pass runs on the calling thread alone (waking workers costs more). */
#define LT_PARALLEL_MIN 512
/* Default pass size with several workers: enough frames per worker that the wake-up and join
 * (a few microseconds) stay well under 1 % of the pass (tools/bench: ledgertool bench --engine-sweep). */
#define LT_BATCH_PER_WORKER 16384
/* frames per digest pass of a single-threaded lt_engine_fill_window */
#define LT_WINDOW_PASS 2048
/* strip fallbacks counted (lt_engine_stats): unsupported link type, not IP, malformed */
#define LT_FALLBACK_REASONS 3

typedef struct lt_pool lt_pool;

struct lt_engine {
    lt_reader *reader;
    int algorithm;
    int strip;
    size_t digest_size;
    size_t record_size;
    lt_dctx dctx;           /* keyed once; its CPU path is fixed for the engine's life */
    lt_frame *batch;        /* batch_cap frames from the reader */
    const uint8_t **msg;    /* per frame of the batch: the stripped bytes to hash ... */
    uint32_t *msg_len;      /* ... and their length */
    size_t batch_cap;
    size_t batch_len; /* frames in batch */
    size_t batch_pos; /* next frame to digest */
    int reader_status; /* last non-OK status from the reader (LT_EOF or an error), 0 while reading */
    unsigned workers;  /* threads per pass, the calling one included */
    lt_pool *pool;     /* workers - 1 pthreads; NULL with one worker */
    /* Read-ahead (several workers, a reader whose frame data outlive the next call: mmap'd files):
     * while the workers digest the pass that ends the current batch, the calling thread reads the
     * next batch into `ahead`, then joins the pass; the batches are swapped when it is needed. */
    lt_frame *ahead;       /* NULL: no read-ahead */
    size_t ahead_len;
    int ahead_status;      /* lt_reader_next's status for that batch */
    int ahead_ready;
    uint64_t fault;        /* 1 + byte offset where the reader's file shrank under a pass (atomic); 0: none */
    uint64_t fallbacks[LT_FALLBACK_REASONS]; /* frames whose strip mode fell back, per reason (atomic) */
};

static inline uint16_t record_flags(const lt_frame *f) {
    uint16_t fl = 0;
    if (f->caplen < f->wire_len) fl |= LT_FLAG_TRUNCATED;
    if (f->rflags & LT_RF_NO_TIMESTAMP) fl |= LT_FLAG_NO_TIMESTAMP;
    if (f->rflags & LT_RF_CAPLEN_GT_SNAPLEN) fl |= LT_FLAG_CAPLEN_GT_SNAPLEN;
    if (f->rflags & LT_RF_GAP) fl = LT_FLAG_GAP; /* live source: wire_len frames were dropped */
    return fl;
}

static const uint8_t no_bytes[1];

/* One 8-byte store on little-endian hosts (GCC does not always merge lt_store_le64's byte stores). */
static inline void put_le64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    lt_store_le64(p, v);
#endif
}

/* Frames batch[pos, pos + n) -> records numbered from seq at `out`: prepare_slice writes the fixed
 * part of every record and the byte range its strip mode hashes, then digest_slice makes one
 * multi-buffer digest call writing straight into the records. Touches only its own slice of msg /
 * msg_len, so slices can run concurrently. Returns the captured bytes. */
static inline __attribute__((always_inline)) uint64_t prepare_loop(const lt_engine *e, size_t pos, size_t n,
                                                                   uint64_t seq, uint8_t *out, int *has_gaps,
                                                                   uint64_t fb[LT_FALLBACK_REASONS],
                                                                   const int strip) {
    const lt_frame *f = e->batch + pos;
    const uint8_t **msg = e->msg + pos;
    uint32_t *msg_len = e->msg_len + pos;
    /* locals, and every frame field read before the record is written: stores through uint8_t *
     * may alias anything, so the compiler would reload e->... and f->... after each one */
    const size_t record_size = e->record_size;
    uint8_t *rec = out;
    uint64_t bytes = 0;
    int gaps = 0;
    for (size_t i = 0; i < n; i++, f++, rec += record_size) {
        const uint8_t *data = f->data;
        const uint64_t ts = (uint64_t)f->ts_ns;
        const uint32_t caplen = f->caplen, wire_len = f->wire_len, linktype = f->linktype, rflags = f->rflags;
        uint32_t aux = f->interface_id;
        uint16_t fl = record_flags(f);
        uint32_t off = 0, len = caplen;
        if (rflags & LT_RF_GAP) { /* GAP record: aux = dropped frames, lengths and digest 0 */
            aux = wire_len;
            data = no_bytes;  /* digested as empty, then zeroed below */
            len = 0;
            gaps = 1;
        } else {
            /* `frame` hashes the captured bytes as stored; the others hash the range strip.c picks. */
            if (strip != LT_STRIP_FRAME) {
                const uint16_t sf = lt_strip_range(strip, linktype, data, caplen, wire_len, &off, &len);
                /* each fallback returns at once in strip.c: at most one of these is set */
                fb[0] += (sf & LT_FLAG_UNSUPPORTED_LINKTYPE) != 0;
                fb[1] += (sf & LT_FLAG_NON_IP) != 0;
                fb[2] += (sf & LT_FLAG_MALFORMED) != 0;
                fl |= sf;
            }
            bytes += caplen;
        }
        /* the fixed part as four little-endian words (layout at the top of this file) */
        put_le64(rec, seq + i);
        put_le64(rec + 8, ts);
        put_le64(rec + 16, (uint64_t)((rflags & LT_RF_GAP) ? 0 : wire_len) | (uint64_t)caplen << 32);
        put_le64(rec + 24, (uint64_t)fl | (uint64_t)(uint16_t)linktype << 16 | (uint64_t)aux << 32);
        msg[i] = data + off;
        msg_len[i] = len;
    }
    *has_gaps = gaps;
    return bytes;
}

/* `frame` gets its own loop: with no call to strip.c in it, nothing is spilled around the call */
static uint64_t prepare_slice(const lt_engine *e, size_t pos, size_t n, uint64_t seq, uint8_t *out, int *has_gaps,
                              uint64_t fb[LT_FALLBACK_REASONS]) {
    if (e->strip == LT_STRIP_FRAME) return prepare_loop(e, pos, n, seq, out, has_gaps, fb, LT_STRIP_FRAME);
    return prepare_loop(e, pos, n, seq, out, has_gaps, fb, e->strip);
}

static void zero_gap_digests(const lt_engine *e, size_t pos, size_t n, uint8_t *out) {
    const lt_frame *f = e->batch + pos;
    for (size_t i = 0; i < n; i++)
        if (f[i].rflags & LT_RF_GAP) memset(out + i * e->record_size + LT_RECORD_FIXED, 0, e->digest_size);
}

static uint64_t digest_slice(lt_engine *e, size_t pos, size_t n, uint64_t seq, uint8_t *out) {
    int gaps;
    uint64_t fb[LT_FALLBACK_REASONS] = {0};
    uint64_t bytes = prepare_slice(e, pos, n, seq, out, &gaps, fb);
    for (int i = 0; i < LT_FALLBACK_REASONS; i++) /* once per slice: slices run on several threads */
        if (fb[i]) __atomic_fetch_add(&e->fallbacks[i], fb[i], __ATOMIC_RELAXED);
    lt_dctx_run_many(&e->dctx, e->msg + pos, e->msg_len + pos, n, out + LT_RECORD_FIXED, e->record_size);
    if (gaps) zero_gap_digests(e, pos, n, out);
    return bytes;
}

/* ---- worker pool ----
 * A pass is cut into chunks of LT_CHUNK frames that the threads claim with an atomic counter, so
 * a thread that loses its core to another process (2 noisy cores) delays the pass by one chunk, not
 * by a whole static slice. Synchronised per pass only: one wake-up, one join. */
#define LT_CHUNK 2048
struct lt_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long gen;      /* bumped for each pass */
    unsigned pending;       /* workers still on the current pass */
    int quit;
    lt_engine *e;           /* the current pass */
    size_t pos, n;
    uint64_t seq;
    uint8_t *out;
    size_t next;            /* first unclaimed frame of the pass (atomic) */
    unsigned nthreads;      /* started */
    uint64_t bytes[LT_ENGINE_MAX_WORKERS];
    struct lt_pool_arg { lt_pool *pool; unsigned index; } args[LT_ENGINE_MAX_WORKERS];
    pthread_t tid[LT_ENGINE_MAX_WORKERS];
};

/* The frames point into the reader's map: a file truncated meanwhile faults (SIGBUS) in strip or
 * digest, on whichever thread hashes that frame. Each thread's share of a pass runs under the
 * reader's SIGBUS guard (reader.c); a fault records where and ends the thread's share. */
static void note_fault(lt_engine *e, size_t off) {
    uint64_t none = 0;
    __atomic_compare_exchange_n(&e->fault, &none, (uint64_t)off + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Claim and digest chunks of the current pass until none is left (p NULL: the whole of
 * [pos, pos + n) on this thread); returns the captured bytes. */
static uint64_t run_chunks(lt_pool *p, lt_engine *e, size_t pos, size_t n, uint64_t seq, uint8_t *out) {
    volatile uint64_t bytes = 0; /* read after a siglongjmp */
    lt_bus_guard g;
    lt_bus_guard_push(&g, e->reader);
    if (sigsetjmp(g.jb, 0)) {
        note_fault(e, g.fault);
        if (p) __atomic_store_n(&p->next, n, __ATOMIC_RELAXED); /* the others stop claiming too */
        return 0;
    }
    if (!p) {
        bytes = digest_slice(e, pos, n, seq, out);
    } else {
        for (;;) {
            size_t lo = __atomic_fetch_add(&p->next, LT_CHUNK, __ATOMIC_RELAXED);
            if (lo >= n) break;
            size_t hi = lo + LT_CHUNK < n ? lo + LT_CHUNK : n;
            bytes += digest_slice(e, pos + lo, hi - lo, seq + lo, out + lo * e->record_size);
        }
    }
    lt_bus_guard_pop(&g);
    return bytes;
}

static void *pool_worker(void *arg) {
    struct lt_pool_arg *a = arg;
    lt_pool *p = a->pool;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->gen;
        lt_engine *e = p->e;
        size_t pos = p->pos, n = p->n;
        uint64_t seq = p->seq;
        uint8_t *out = p->out;
        pthread_mutex_unlock(&p->mu);
        uint64_t b = run_chunks(p, e, pos, n, seq, out);
        pthread_mutex_lock(&p->mu);
        p->bytes[a->index] = b;
        if (--p->pending == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void pool_stop(lt_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p);
}

static lt_pool *pool_start(unsigned workers) {
    lt_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (unsigned i = 1; i < workers; i++) {
        p->args[i].pool = p;
        p->args[i].index = i;
        if (pthread_create(&p->tid[p->nthreads], NULL, pool_worker, &p->args[i]) != 0) {
            pool_stop(p);
            return NULL;
        }
        p->nthreads++;
    }
    return p;
}

static void read_ahead(lt_engine *e) {
    size_t got = 0;
    e->ahead_status = lt_reader_next(e->reader, e->ahead, e->batch_cap, &got);
    e->ahead_len = got;
    e->ahead_ready = 1;
}

/* One pass over batch[pos, pos + n): split across the workers when it is big enough. `last`: the
 * pass ends the batch, so the calling thread may read the next one ahead first. */
static uint64_t digest_pass(lt_engine *e, size_t pos, size_t n, uint64_t seq, uint8_t *out, int last) {
    if (!e->pool || n < LT_PARALLEL_MIN) return run_chunks(NULL, e, pos, n, seq, out);
    lt_pool *p = e->pool;
    pthread_mutex_lock(&p->mu);
    p->e = e;
    p->pos = pos;
    p->n = n;
    p->seq = seq;
    p->out = out;
    p->next = 0;
    p->pending = e->workers - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    /* the workers only touch batch / msg / msg_len and `out`; the reader fills `ahead` meanwhile */
    if (last && e->ahead && !e->ahead_ready && !e->reader_status) read_ahead(e);
    uint64_t bytes = run_chunks(p, e, pos, n, seq, out);
    pthread_mutex_lock(&p->mu);
    while (p->pending) pthread_cond_wait(&p->done, &p->mu);
    for (unsigned i = 1; i < e->workers; i++) bytes += p->bytes[i];
    pthread_mutex_unlock(&p->mu);
    return bytes;
}

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
    unsigned workers = cfg->workers ? cfg->workers : 1;
    if (workers > LT_ENGINE_MAX_WORKERS || cfg->batch > LT_ENGINE_BATCH_MAX) {
        lt_errf(err, errlen, "workers must be 1..%d and batch at most %d frames", LT_ENGINE_MAX_WORKERS,
                LT_ENGINE_BATCH_MAX);
        return LT_ERR_ARG;
    }
    size_t cap = cfg->batch ? cfg->batch : workers > 1 ? (size_t)LT_BATCH_PER_WORKER * workers : LT_ENGINE_BATCH_DEFAULT;
    if (cap > LT_ENGINE_BATCH_MAX) cap = LT_ENGINE_BATCH_MAX;
    lt_engine *e = calloc(1, sizeof *e);
    if (!e) return LT_ERR_NOMEM;
    e->batch_cap = cap;
    e->workers = workers;
    e->batch = malloc(cap * sizeof *e->batch);
    e->msg = malloc(cap * sizeof *e->msg);
    e->msg_len = malloc(cap * sizeof *e->msg_len);
    if (workers > 1 && lt_reader_frames_stable(r)) e->ahead = malloc(cap * sizeof *e->ahead);
    if (!e->batch || !e->msg || !e->msg_len || (workers > 1 && lt_reader_frames_stable(r) && !e->ahead) ||
        (workers > 1 && !(e->pool = pool_start(workers)))) {
        lt_engine_free(e);
        lt_errf(err, errlen, "out of memory or threads for a batch of %zu frames and %u workers", cap, workers);
        return LT_ERR_NOMEM;
    }
    e->reader = r;
    e->algorithm = cfg->algorithm;
    e->strip = cfg->strip;
    e->digest_size = ds;
    e->record_size = LT_RECORD_FIXED + ds;
    if (lt_dctx_init(&e->dctx, cfg->algorithm, cfg->key) != LT_OK) {
        lt_engine_free(e);
        lt_errf(err, errlen, "algorithm id %d has no usable CPU path", cfg->algorithm);
        return LT_ERR_ARG;
    }
    *out = e;
    return LT_OK;
}

/* Where lt_engine_fill_window sends each pass's records: the accumulator, its output for the
 * windows the records close, and how far it got (it stops when `out` is full: the caller adds the
 * rest). */
typedef struct {
    lt_window_acc *acc;
    uint8_t *out;
    size_t out_len, rsize, emitted, windowed;
    int stopped;
    int scratch; /* the records are wanted only here: passes after the first share one area */
} window_feed;

/* One pass's records, still in cache, into the accumulator (the records `windowed` before them
 * were added; after a stop none is). */
static void feed_window(window_feed *w, const uint8_t *recs, size_t n, size_t stride) {
    if (w->stopped) return;
    size_t k = 0, used = 0, off = w->emitted * w->rsize;
    lt_window_add(w->acc, recs, n, stride, w->out + off, w->out_len - off, &k, &used);
    w->emitted += k;
    w->windowed += used;
    w->stopped = used < n;
}

/* The next batch from the reader into e->batch (the one read ahead, if any): its length, 0 at the
 * end or on an error (e->reader_status then says which); *idle when a live source had nothing. */
static size_t next_batch(lt_engine *e, int *idle) {
    size_t got = 0;
    int st;
    if (e->ahead_ready) { /* read while the previous pass was digested */
        lt_frame *t = e->batch;
        e->batch = e->ahead;
        e->ahead = t;
        got = e->ahead_len;
        st = e->ahead_status;
        e->ahead_ready = 0;
    } else {
        st = lt_reader_next(e->reader, e->batch, e->batch_cap, &got);
    }
    e->batch_len = got;
    e->batch_pos = 0;
    if (st != LT_OK) e->reader_status = st;
    *idle = got == 0 && st == LT_OK;
    return got;
}

/* How long one fill of a stream or live source gathers frames before it hands them out. */
#define LT_FILL_MAX_NS 100000000

static int fill(lt_engine *e, uint64_t first_seq, uint8_t *out, size_t max_records, size_t *n,
                uint64_t *bytes_captured, window_feed *win) {
    size_t done = 0;
    uint64_t bytes = 0;
    int idle = 0; /* a live source returned LT_OK with 0 frames: nothing arrived, not the end */
    *n = 0;
    if (!out || max_records > SIZE_MAX / e->record_size) return LT_ERR_ARG;
    /* a pipe or a live source may trickle, a frame now and then, never quiet for a whole wait: what
     * came is handed out after LT_FILL_MAX_NS so that the caller acts on --duration,
     * --segment-seconds and signals (a file's batches come at memory speed) */
    int64_t deadline = lt_reader_frames_stable(e->reader) ? 0 : lt_mono_ns() + LT_FILL_MAX_NS;
    while (done < max_records) {
        if (e->batch_pos == e->batch_len) {
            if (e->reader_status || (done && deadline && lt_mono_ns() >= deadline)) break;
            if (next_batch(e, &idle) == 0) break;
        }
        size_t take = e->batch_len - e->batch_pos;
        if (take > max_records - done) take = max_records - done;
        /* one thread feeding a window: passes of LT_WINDOW_PASS frames, whose records the
         * accumulator reads back from L1/L2 rather than after the pass's frames went through */
        if (win && !e->pool && take > LT_WINDOW_PASS) take = LT_WINDOW_PASS;
        uint64_t prior = bytes;
        uint8_t *at = out + done * e->record_size;
        /* scratch: every pass after the call's first is digested into the one area after it, which
         * stays in cache, instead of into fresh lines of `out` (written back to memory unread) */
        uint8_t *dst = at;
        if (win && win->scratch && !win->stopped && done && !e->pool &&
            max_records >= 2 * LT_WINDOW_PASS)
            dst = out + LT_WINDOW_PASS * e->record_size;
        bytes += digest_pass(e, e->batch_pos, take, first_seq + done, dst,
                             e->batch_pos + take == e->batch_len);
        if (e->fault) { /* the file shrank under this pass: none of this pass's records is handed out */
            lt_reader_fail_shrunk(e->reader, e->fault - 1);
            e->reader_status = LT_ERR_IO;
            e->batch_pos = e->batch_len;
            e->ahead_ready = 0;
            /* lt_engine_fill hands out none of the call's; lt_engine_fill_window the passes it
             * already added to the window (the error comes with the next call) */
            if (!win || !done) {
                if (bytes_captured) *bytes_captured = 0;
                return LT_ERR_IO;
            }
            *n = done;
            if (bytes_captured) *bytes_captured = prior;
            return LT_OK;
        }
        if (win) {
            feed_window(win, dst, take, e->record_size);
            /* the output is full: the caller adds the rest, from their places in out (the passes
             * after this one are digested there) */
            if (win->stopped && dst != at) memmove(at, dst, take * e->record_size);
        }
        e->batch_pos += take;
        done += take;
    }
    *n = done;
    if (bytes_captured) *bytes_captured = bytes;
    if (done > 0 || idle) return LT_OK;
    return e->reader_status ? e->reader_status : LT_EOF;
}

int lt_engine_fill(lt_engine *e, uint64_t first_seq, uint8_t *out, size_t max_records, size_t *n,
                   uint64_t *bytes_captured) {
    return fill(e, first_seq, out, max_records, n, bytes_captured, NULL);
}

int lt_engine_fill_select(lt_engine *e, uint64_t first_seq, const uint8_t *keep, size_t keep_len, uint8_t *out,
                          size_t max_records, size_t *n, size_t *frames, uint64_t *bytes_captured) {
    if (!e || !keep || !n || !frames || !out || max_records > SIZE_MAX / e->record_size) return LT_ERR_ARG;
    size_t done = 0, kept = 0;
    uint64_t bytes = 0;
    int idle = 0;
    *n = *frames = 0;
    while (done < keep_len && kept < max_records) {
        if (e->batch_pos == e->batch_len) {
            if (e->reader_status || !next_batch(e, &idle)) break;
        }
        size_t pos = e->batch_pos, avail = e->batch_len - pos, take = 0, k = 0;
        if (avail > keep_len - done) avail = keep_len - done;
        /* the kept frames moved to the front of this stretch (consumed after this call either way) */
        for (; take < avail; take++) {
            const lt_frame *f = e->batch + pos + take;
            if (keep[done + take]) {
                if (kept + k == max_records) break;
                e->batch[pos + k++] = *f;
            }
            if (!(f->rflags & LT_RF_GAP)) bytes += f->caplen;
        }
        uint8_t *recs = out + kept * e->record_size;
        if (k) run_chunks(NULL, e, pos, k, 0, recs);
        if (e->fault) { /* the file shrank under the digest: nothing of this call is handed out */
            lt_reader_fail_shrunk(e->reader, e->fault - 1);
            e->reader_status = LT_ERR_IO;
            e->batch_pos = e->batch_len;
            e->ahead_ready = 0;
            if (bytes_captured) *bytes_captured = 0;
            return LT_ERR_IO;
        }
        for (size_t j = 0, i = 0; i < k; j++) /* each record's own frame index */
            if (keep[done + j]) put_le64(recs + i++ * e->record_size, first_seq + done + j);
        e->batch_pos += take;
        done += take;
        kept += k;
    }
    *n = kept;
    *frames = done;
    if (bytes_captured) *bytes_captured = bytes;
    if (done > 0 || idle) return LT_OK;
    return e->reader_status ? e->reader_status : LT_EOF;
}

int lt_engine_fill_window(lt_engine *e, uint64_t first_seq, uint8_t *out, size_t max_records,
                          size_t *n, uint64_t *bytes_captured, lt_window_acc *acc, uint8_t *win_out,
                          size_t win_out_len, size_t *n_windows, size_t *windowed, int scratch) {
    if (!acc || !n_windows || !windowed || (win_out_len && !win_out)) return LT_ERR_ARG;
    size_t rsize = 0, dsize = 0;
    lt_window_acc_sizes(acc, &rsize, &dsize);
    if (dsize != e->digest_size) return LT_ERR_ARG;
    window_feed w = {acc, win_out, win_out_len, rsize, 0, 0, 0, scratch != 0};
    *n_windows = *windowed = 0;
    int st = fill(e, first_seq, out, max_records, n, bytes_captured, &w);
    *n_windows = w.emitted;
    *windowed = w.windowed;
    return st;
}

int lt_engine_get_stats(const lt_engine *e, lt_engine_stats *out) {
    if (!e || !out) return LT_ERR_ARG;
    out->strip_unsupported_linktype = __atomic_load_n(&e->fallbacks[0], __ATOMIC_RELAXED);
    out->strip_non_ip = __atomic_load_n(&e->fallbacks[1], __ATOMIC_RELAXED);
    out->strip_malformed = __atomic_load_n(&e->fallbacks[2], __ATOMIC_RELAXED);
    return LT_OK;
}

void lt_engine_free(lt_engine *e) {
    if (!e) return;
    if (e->pool) pool_stop(e->pool);
    lt_wipe(&e->dctx, sizeof e->dctx);  /* key material */
    free(e->batch);
    free(e->msg);
    free(e->msg_len);
    free(e->ahead);
    free(e);
}

/* ---- measurement only (scripts/hotpath_account.py, docs/benchmarks.md "Where a frame's time
 * goes") ----
 * The single-worker loop of lt_engine_fill over the rest of the reader, batch by batch, with the
 * monotonic clock read between the stages: ns[0] reader (lt_reader_next), ns[1] records + strip
 * (prepare_slice), ns[2] digest (lt_dctx_run_many; skipped when `digest` is 0, leaving the digest
 * bytes of the records unwritten). `out` holds one batch of records. */
int lt_engine_profile(lt_engine *e, uint8_t *out, size_t out_records, int digest, uint64_t ns[3], uint64_t *frames) {
    if (!e || !out || out_records < e->batch_cap || e->batch_pos != e->batch_len) return LT_ERR_ARG;
    uint64_t seq = 0;
    ns[0] = ns[1] = ns[2] = 0;
    for (;;) {
        size_t got = 0;
        uint64_t t0 = (uint64_t)lt_mono_ns();
        int st = lt_reader_next(e->reader, e->batch, e->batch_cap, &got);
        uint64_t t1 = (uint64_t)lt_mono_ns();
        ns[0] += t1 - t0;
        if (got == 0) {
            *frames = seq;
            return st == LT_EOF ? LT_OK : st;
        }
        int gaps;
        uint64_t fb[LT_FALLBACK_REASONS] = {0};
        prepare_slice(e, 0, got, seq, out, &gaps, fb);
        uint64_t t2 = (uint64_t)lt_mono_ns();
        ns[1] += t2 - t1;
        if (digest) {
            lt_dctx_run_many(&e->dctx, e->msg, e->msg_len, got, out + LT_RECORD_FIXED, e->record_size);
            if (gaps) zero_gap_digests(e, 0, got, out);
            ns[2] += (uint64_t)lt_mono_ns() - t2;
        }
        seq += got;
    }
}
