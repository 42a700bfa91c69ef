/* Measurement helpers of ledgertool_testing.h: the isolation digest benchmark (N pthreads, each
 * digesting from its own copy of a buffer; no reader, no records) and the TSC rate. Threads start
 * together at a start signal; the elapsed time is wall time from the barrier to the last thread's
 * finish, so aggregate frames/s = threads * count / elapsed. */
#include <pthread.h>
#include <stdlib.h>

#include "ledgertool.h"
#include "ledgertool_testing.h"
#include "lt_internal.h"
#include "clock.h"

typedef struct {
    int algorithm;
    const uint8_t *key;
    uint8_t *buf;            /* this thread's own copy */
    size_t buf_len, size;
    uint64_t count;
    size_t batch;            /* 0: one message per call; else messages per lt_dctx_run_many call */
    uint64_t elapsed_ns;     /* this thread's own time */
    uint8_t sink[16];
    int status;
    struct bench_start *start;
} bench_job;

/* Start line: workers count themselves in as ready, then wait for `go` (or `abort`). */
struct bench_start {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned ready;
    int go, abort;
};

/* Keyed once, like the engine: per-message cost only. batch > 0: `batch` messages per
 * lt_dctx_run_many call (the engine's entry, multi-buffer where the path has it), else one
 * lt_dctx_run per message. Messages step 64 bytes through the buffer like consecutive frames. */
#define LT_BENCH_BATCH_MAX 4096
/* noinline: instruction counts can be taken on it alone (valgrind --toggle-collect=bench_one_thread) */
__attribute__((noinline))
static int bench_one_thread(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                            uint64_t count, size_t batch, uint64_t *elapsed_ns, uint8_t *sink) {
    size_t ds = lt_digest_size(algorithm);
    if (!ds || size > buf_len || size > UINT32_MAX || batch > LT_BENCH_BATCH_MAX) return LT_ERR_ARG;
    lt_dctx c;
    if (lt_dctx_init(&c, algorithm, key) != LT_OK) return LT_ERR_ARG;
    uint8_t out[32] = {0}, acc[16] = {0};
    size_t slots = buf_len - size + 1, pos = 0;
    if (batch == 0) {
        uint64_t t0 = (uint64_t)lt_mono_ns();
        for (uint64_t i = 0; i < count; i++) {
            lt_dctx_run(&c, buf + pos, size, out);
            for (size_t k = 0; k < 16 && k < ds; k++) acc[k] ^= out[k];
            pos += 64;
            if (pos >= slots) pos = 0;
        }
        *elapsed_ns = (uint64_t)lt_mono_ns() - t0;
    } else {
        /* the message tables are set up outside the timed loop, as the engine strips before digesting */
        const uint8_t **msgs = malloc(batch * sizeof *msgs);
        uint32_t *lens = malloc(batch * sizeof *lens);
        uint8_t *outs = malloc(batch * 32);
        if (!msgs || !lens || !outs) {
            free(msgs); free(lens); free(outs);
            lt_wipe(&c, sizeof c);
            return LT_ERR_NOMEM;
        }
        for (size_t i = 0; i < batch; i++) {
            msgs[i] = buf + pos;
            lens[i] = (uint32_t)size;
            pos += 64;
            if (pos >= slots) pos = 0;
        }
        uint64_t t0 = (uint64_t)lt_mono_ns();
        for (uint64_t done = 0; done < count;) {
            size_t n = count - done < batch ? (size_t)(count - done) : batch;
            lt_dctx_run_many(&c, msgs, lens, n, outs, 32);
            for (size_t k = 0; k < 16 && k < ds; k++) acc[k] ^= outs[k];
            done += n;
        }
        *elapsed_ns = (uint64_t)lt_mono_ns() - t0;
        free(msgs); free(lens); free(outs);
    }
    memcpy(sink, acc, 16);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

static void *bench_worker(void *arg) {
    bench_job *j = arg;
    struct bench_start *s = j->start;
    pthread_mutex_lock(&s->mu);
    s->ready++;
    pthread_cond_broadcast(&s->cv);
    while (!s->go && !s->abort) pthread_cond_wait(&s->cv, &s->mu);
    int run = s->go;
    pthread_mutex_unlock(&s->mu);
    if (run)
        j->status = bench_one_thread(j->algorithm, j->key, j->buf, j->buf_len, j->size, j->count, j->batch,
                                     &j->elapsed_ns, j->sink);
    return NULL;
}

int lt_bench_digest_batch(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                          uint64_t count, unsigned threads, size_t batch, uint64_t *elapsed_ns, uint64_t *thread_ns,
                          uint8_t *sink) {
    if (!lt_digest_size(algorithm) || size > buf_len || threads < 1 || threads > LT_BENCH_MAX_THREADS)
        return LT_ERR_ARG;
    bench_job *jobs = calloc(threads, sizeof *jobs);
    pthread_t *tids = calloc(threads, sizeof *tids);
    struct bench_start start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    int rc = LT_OK;
    unsigned made = 0, i;
    uint64_t t0 = 0;
    if (!jobs || !tids) { rc = LT_ERR_NOMEM; goto out; }
    for (i = 0; i < threads; i++) {
        jobs[i].buf = malloc(buf_len);
        if (!jobs[i].buf) { rc = LT_ERR_NOMEM; goto out; }
        memcpy(jobs[i].buf, buf, buf_len);
        jobs[i].algorithm = algorithm;
        jobs[i].key = key;
        jobs[i].buf_len = buf_len;
        jobs[i].size = size;
        jobs[i].count = count;
        jobs[i].batch = batch;
        jobs[i].start = &start;
    }
    for (i = 0; i < threads; i++) {
        if (pthread_create(&tids[i], NULL, bench_worker, &jobs[i]) != 0) break;
        made++;
    }
    pthread_mutex_lock(&start.mu);
    if (made < threads) {
        start.abort = 1;  /* could not start them all: release the ones waiting, time nothing */
        rc = LT_ERR_NOMEM;
    } else {
        while (start.ready < threads) pthread_cond_wait(&start.cv, &start.mu);
        /* the clock starts before the go signal: taken after it, a descheduled main thread could
         * start timing when the workers were already done (elapsed ~0, absurd rates on 2 cores) */
        t0 = (uint64_t)lt_mono_ns();
        start.go = 1;
    }
    pthread_cond_broadcast(&start.cv);
    pthread_mutex_unlock(&start.mu);
    for (i = 0; i < made; i++) pthread_join(tids[i], NULL);
    uint64_t t1 = (uint64_t)lt_mono_ns();
    if (rc != LT_OK) goto out;
    for (i = 0; i < threads; i++)
        if (jobs[i].status != LT_OK) { rc = jobs[i].status; goto out; }
    *elapsed_ns = t1 - t0;
    uint8_t acc[16] = {0};
    for (i = 0; i < threads; i++) {
        if (thread_ns) thread_ns[i] = jobs[i].elapsed_ns;
        for (size_t k = 0; k < 16; k++) acc[k] ^= jobs[i].sink[k];
    }
    memcpy(sink, acc, 16);
out:
    if (jobs)
        for (i = 0; i < threads; i++) free(jobs[i].buf);
    free(jobs);
    free(tids);
    return rc;
}

/* TSC ticks per second against CLOCK_MONOTONIC (x86-64 only; invariant TSC assumed: it ticks at the
 * nominal rate, not the boosted core clock, which the docs say where cycles are reported). */
#if defined(__x86_64__)
#include <x86intrin.h>
double lt_tsc_hz(unsigned ms) {
    if (ms == 0) ms = 1;
    uint64_t n0 = (uint64_t)lt_mono_ns(), t0 = __rdtsc(), n1;
    do { n1 = (uint64_t)lt_mono_ns(); } while (n1 - n0 < (uint64_t)ms * 1000000ull);
    uint64_t t1 = __rdtsc();
    return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}
#else
double lt_tsc_hz(unsigned ms) { return 0.0; }
#endif
