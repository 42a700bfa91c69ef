/*
 * ledgertool native engine: measurement and test-only entry points. Not part of the capture or
 * verification path; `ledgertool bench`, scripts/ and tests/ use them, and cffi exposes them from
 * the same module (its own CDEF block below). Same conventions as ledgertool.h.
 */
#ifndef LEDGERTOOL_TESTING_H
#define LEDGERTOOL_TESTING_H

#include "ledgertool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CDEF BEGIN */

/* ---- published vectors ---- */

/* Test entry points with the inputs published vectors use; both use the CPU path currently
 * selected for their algorithm. lt_gmac_aes128: AES-128-GCM tag (16 bytes) of an empty plaintext
 * with `aad` under a 96-bit `iv` (the ledger always uses the all-zero IV). lt_hmac_sha256: full
 * 32-byte HMAC-SHA-256 with a key of any length. */
int lt_gmac_aes128(const uint8_t *key, const uint8_t *iv, const uint8_t *aad, size_t len, uint8_t *tag);
int lt_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len, uint8_t *out);

/* ---- Merkle leaf lanes ---- */

/* Make n (1, 4 or 16) the most whole SHA-256 leaves lt_merkle_leaves hashes side by side
 * (lt_merkle_lanes; 0: the default again); LT_ERR_ARG where this CPU cannot run n. Not
 * thread-safe: tests and benchmarks call it with no hashing under way. */
int lt_merkle_lanes_force(int lanes);

/* ---- benchmarks and profiling ---- */

#define LT_BENCH_MAX_THREADS 1024

/* Run `threads` pthreads (1..LT_BENCH_MAX_THREADS), each digesting `count` messages of `size` bytes
 * (stepping 64 bytes through its own private copy of `buf`, buf_len >= size) keyed once with `key`,
 * `batch` messages at a time through the batch entry the engine uses (lt_dctx_run_many: multi-buffer
 * code where the path has it; batch 0 = one lt_dctx_run call per message, at most 4096). The threads
 * start together at a barrier; *elapsed_ns is the wall time from that start until the last one
 * finished, so the aggregate rate is threads * count / elapsed. thread_ns (optional, `threads`
 * entries) receives each thread's own time. `sink` (16 bytes) gets the XOR of every digest, so the
 * work cannot be optimised away. Isolation benchmark: no reader, no records. Called through cffi,
 * the GIL is released for the whole run. LT_OK, LT_ERR_ARG, LT_ERR_NOMEM. */
int lt_bench_digest_batch(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                          uint64_t count, unsigned threads, size_t batch, uint64_t *elapsed_ns, uint64_t *thread_ns,
                          uint8_t *sink);

/* Measurement only: run the single-worker engine loop over the rest of e's reader, one batch
 * (the engine's batch size, frames) at a time into `out` (at least that many records), timing
 * each stage with CLOCK_MONOTONIC: ns[0] reading, ns[1] strip + record fields, ns[2] digest (not
 * run when `digest` is 0: the records' digest bytes are then left as they were). *frames gets the
 * frames read. LT_OK, LT_ERR_ARG (out too small, or e has frames pending), or the reader's error. */
int lt_engine_profile(lt_engine *e, uint8_t *out, size_t out_records, int digest, uint64_t ns[3], uint64_t *frames);

/* Time-stamp counter ticks per second, measured against CLOCK_MONOTONIC over ~`ms` milliseconds;
 * 0 where there is no TSC. */
double lt_tsc_hz(unsigned ms);

/* CDEF END */

#ifdef __cplusplus
}
#endif
#endif /* LEDGERTOOL_TESTING_H */
