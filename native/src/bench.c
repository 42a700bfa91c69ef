/* Multi-threaded digest benchmark: N pthreads, each digesting from its own copy of a buffer.
 *
 * Isolation benchmark like lt_bench_digest (no reader, no records). Threads start together at a
 * start signal; the elapsed time is wall time from the barrier to the last thread's finish, so
 * aggregate frames/s = threads * count / elapsed. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "ledgertool.h"
#include "lt_internal.h"

static uint64_t bench_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

int lt_bench_digest_batch1(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                           uint64_t count, size_t batch, uint64_t *elapsed_ns, uint8_t *sink);

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
        j->status = lt_bench_digest_batch1(j->algorithm, j->key, j->buf, j->buf_len, j->size, j->count, j->batch,
                                           &j->elapsed_ns, j->sink);
    return NULL;
}

int lt_bench_digest_threads(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                            uint64_t count, unsigned threads, uint64_t *elapsed_ns, uint64_t *thread_ns,
                            uint8_t *sink) {
    return lt_bench_digest_batch(algorithm, key, buf, buf_len, size, count, threads, 0, elapsed_ns, thread_ns, sink);
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
        t0 = bench_mono_ns();
        start.go = 1;
    }
    pthread_cond_broadcast(&start.cv);
    pthread_mutex_unlock(&start.mu);
    for (i = 0; i < made; i++) pthread_join(tids[i], NULL);
    uint64_t t1 = bench_mono_ns();
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
