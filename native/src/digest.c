/* The one-message entry points used by tests and the isolation benchmark. Each keys a context
 * with the CPU path dispatch.c selected; the per-algorithm code sits in digest_<family>[_<isa>].c. */
#include "ledgertool.h"
#include "lt_internal.h"

int lt_digest(int algorithm, const uint8_t *key, const uint8_t *msg, size_t len, uint8_t *out) {
    lt_dctx c;
    int st = lt_dctx_init(&c, algorithm, key);
    if (st != LT_OK) return st;
    lt_dctx_run(&c, msg, len, out);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

int lt_digest_many(int algorithm, const uint8_t *key, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                   uint8_t *out, size_t out_stride) {
    lt_dctx c;
    int st = lt_dctx_init(&c, algorithm, key);
    if (st != LT_OK) return st;
    if (n && (!msgs || !lens || !out || out_stride < c.out_len || n > SIZE_MAX / out_stride)) {
        lt_wipe(&c, sizeof c);
        return LT_ERR_ARG;
    }
    lt_dctx_run_many(&c, msgs, lens, n, out, out_stride);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

int lt_gmac_aes128(const uint8_t *key, const uint8_t *iv, const uint8_t *aad, size_t len, uint8_t *tag) {
    const lt_cpu_impl *i = lt_dispatch_impl(LT_ALG_AES_128_GMAC);
    lt_dctx c;
    memset(&c, 0, sizeof c);
    c.algorithm = LT_ALG_AES_128_GMAC;
    c.out_len = 16;
    i->init(&c, key, 16, iv);
    i->digest(&c, aad, len, tag);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

int lt_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len, uint8_t *out) {
    const lt_cpu_impl *i = lt_dispatch_impl(LT_ALG_HMAC_SHA256_128);
    lt_dctx c;
    memset(&c, 0, sizeof c);
    c.algorithm = LT_ALG_HMAC_SHA256_128;
    c.out_len = 32;
    i->init(&c, key, key_len, NULL);
    i->digest(&c, msg, len, out);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

#include <stdlib.h>
#include <time.h>

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Keyed once, like the engine: per-message cost only. batch > 0: `batch` messages per
 * lt_dctx_run_many call (the engine's entry, multi-buffer where the path has it), else one
 * lt_dctx_run per message. Messages step 64 bytes through the buffer like consecutive frames. */
#define LT_BENCH_BATCH_MAX 4096
int lt_bench_digest_batch1(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                           uint64_t count, size_t batch, uint64_t *elapsed_ns, uint8_t *sink);
int lt_bench_digest_batch1(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                           uint64_t count, size_t batch, uint64_t *elapsed_ns, uint8_t *sink) {
    size_t ds = lt_digest_size(algorithm);
    if (!ds || size > buf_len || size > UINT32_MAX || batch > LT_BENCH_BATCH_MAX) return LT_ERR_ARG;
    lt_dctx c;
    if (lt_dctx_init(&c, algorithm, key) != LT_OK) return LT_ERR_ARG;
    uint8_t out[32] = {0}, acc[16] = {0};
    size_t slots = buf_len - size + 1, pos = 0;
    if (batch == 0) {
        uint64_t t0 = mono_ns();
        for (uint64_t i = 0; i < count; i++) {
            lt_dctx_run(&c, buf + pos, size, out);
            for (size_t k = 0; k < 16 && k < ds; k++) acc[k] ^= out[k];
            pos += 64;
            if (pos >= slots) pos = 0;
        }
        *elapsed_ns = mono_ns() - t0;
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
        uint64_t t0 = mono_ns();
        for (uint64_t done = 0; done < count;) {
            size_t n = count - done < batch ? (size_t)(count - done) : batch;
            lt_dctx_run_many(&c, msgs, lens, n, outs, 32);
            for (size_t k = 0; k < 16 && k < ds; k++) acc[k] ^= outs[k];
            done += n;
        }
        *elapsed_ns = mono_ns() - t0;
        free(msgs); free(lens); free(outs);
    }
    memcpy(sink, acc, 16);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

int lt_bench_digest(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                    uint64_t count, uint64_t *elapsed_ns, uint8_t *sink) {
    return lt_bench_digest_batch1(algorithm, key, buf, buf_len, size, count, 0, elapsed_ns, sink);
}

/* TSC ticks per second against CLOCK_MONOTONIC (x86-64 only; invariant TSC assumed: it ticks at the
 * nominal rate, not the boosted core clock, which the docs say where cycles are reported). */
#if defined(__x86_64__)
#include <x86intrin.h>
double lt_tsc_hz(unsigned ms) {
    if (ms == 0) ms = 1;
    uint64_t n0 = mono_ns(), t0 = __rdtsc(), n1;
    do { n1 = mono_ns(); } while (n1 - n0 < (uint64_t)ms * 1000000ull);
    uint64_t t1 = __rdtsc();
    return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}
#else
double lt_tsc_hz(unsigned ms) { return 0.0; }
#endif
