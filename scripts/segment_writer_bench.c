/*
 * Measurement driver for issue 14: where lt_segment_writer_append's time goes. Measurement only
 * (nothing here is used by ledgertool); build by hand:
 *
 *   gcc -O3 -std=gnu11 -pthread -Inative/include -Inative/src scripts/segment_writer_bench.c \
 *       native/src/*.c -o /tmp/segment_writer_bench
 *
 *   segment_writer_bench DIR RSIZE LEAF NREC BATCH REPS
 *
 * For each repeat (fresh file each time, unlinked after): the whole writer (new, append in BATCH
 * records, finish), its leaves alone (lt_merkle_leaves over the same buffer), and writev of the
 * same bytes to a fresh file, to /dev/null and to a reused file; best and median ns per record,
 * with user and system CPU of the best.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ledgertool.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(int sys) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    struct timeval t = sys ? ru.ru_stime : ru.ru_utime;
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_usec * 1000ull;
}

typedef struct { double wall, user, sys; } sample;

static int cmp(const void *a, const void *b) {
    double x = ((const sample *)a)->wall, y = ((const sample *)b)->wall;
    return (x > y) - (x < y);
}

static const char *dir;
static size_t rsize, leaf, nrec, batch;
static uint8_t *recs, *leaves;

static int fresh_fd(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) { perror(path); exit(2); }
    return fd;
}

static void drop(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static void run_writer(int fd) {
    uint8_t key[32] = {1}, chain[32] = {2}, root[32], last[32];
    lt_segment_writer *w;
    lt_segment_counters c;
    int e;
    if (lt_segment_writer_new(fd, key, 32, chain, rsize, leaf, nrec, &w) != LT_OK) exit(3);
    for (size_t off = 0; off < nrec; off += batch) {
        size_t n = nrec - off < batch ? nrec - off : batch;
        if (lt_segment_writer_append(w, recs + off * rsize, n, &e) != LT_OK) exit(4);
    }
    if (lt_segment_writer_finish(w, root, last, &c) != LT_OK) exit(5);
    lt_segment_writer_free(w);
}

static void run_leaves(void) {
    for (size_t off = 0; off < nrec; off += batch) {
        size_t n = nrec - off < batch ? nrec - off : batch;
        lt_merkle_leaves(recs + off * rsize, rsize, n, leaf, leaves, (nrec / leaf + 2) * 32);
    }
}

static void run_write(int fd) {
    for (size_t off = 0; off < nrec; off += batch) {
        size_t n = nrec - off < batch ? nrec - off : batch;
        if (write(fd, recs + off * rsize, n * rsize) != (ssize_t)(n * rsize)) exit(6);
    }
}

enum { WRITER_FRESH, WRITER_REUSED, LEAVES, WRITE_FRESH, WRITE_REUSED, WRITE_NULL, NCASE };
static const char *names[NCASE] = {"writer-fresh", "writer-reused", "leaves", "write-fresh", "write-reused",
                                   "write-devnull"};

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: DIR RSIZE LEAF NREC BATCH REPS\n"); return 2; }
    dir = argv[1], rsize = strtoul(argv[2], 0, 0), leaf = strtoul(argv[3], 0, 0);
    nrec = strtoul(argv[4], 0, 0), batch = strtoul(argv[5], 0, 0);
    int reps = atoi(argv[6]);
    recs = malloc(nrec * rsize);
    leaves = malloc((nrec / leaf + 2) * 32);
    for (size_t i = 0; i < nrec * rsize; i++) recs[i] = (uint8_t)(i * 2654435761u >> 13);
    for (size_t i = 0; i < nrec; i++) memset(recs + i * rsize + 24, 0, 8); /* flags 0: no GAP */
    sample *s[NCASE];
    for (int k = 0; k < NCASE; k++) s[k] = calloc(reps, sizeof(sample));
    int reused = fresh_fd("reused"), reused_w = fresh_fd("reused-w"), devnull = open("/dev/null", O_WRONLY);
    run_write(reused), run_write(reused_w);
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < NCASE; k++) {
            int fd = -1;
            if (k == WRITER_FRESH) fd = fresh_fd("w");
            if (k == WRITE_FRESH) fd = fresh_fd("f");
            if (k == WRITER_REUSED) fd = reused_w, lseek(fd, 0, SEEK_SET);
            if (k == WRITE_REUSED) fd = reused, lseek(fd, 0, SEEK_SET);
            if (k == WRITE_NULL) fd = devnull;
            uint64_t t0 = now_ns(), u0 = cpu_ns(0), s0 = cpu_ns(1);
            if (k == WRITER_FRESH || k == WRITER_REUSED) run_writer(fd);
            else if (k == LEAVES) run_leaves();
            else run_write(fd);
            uint64_t t1 = now_ns(), u1 = cpu_ns(0), s1 = cpu_ns(1);
            s[k][r] = (sample){(double)(t1 - t0) / nrec, (double)(u1 - u0) / nrec, (double)(s1 - s0) / nrec};
            if (k == WRITER_FRESH) close(fd), drop("w");
            if (k == WRITE_FRESH) close(fd), drop("f");
        }
    }
    for (int k = 0; k < NCASE; k++) {
        qsort(s[k], reps, sizeof(sample), cmp);
        printf("case=%s rsize=%zu leaf=%zu nrec=%zu batch=%zu best_ns=%.2f median_ns=%.2f best_user_ns=%.2f "
               "best_sys_ns=%.2f\n", names[k], rsize, leaf, nrec, batch, s[k][0].wall, s[k][reps / 2].wall,
               s[k][0].user, s[k][0].sys);
    }
    drop("reused"), drop("reused-w");
    return 0;
}
