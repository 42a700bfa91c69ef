/* Digest algorithm registry: sizes and the one-message entry point used by tests and the engine. */
#include "ledgertool.h"
#include "lt_internal.h"

size_t lt_digest_size(int algorithm) {
    switch (algorithm) {
    case LT_ALG_SIPHASH_1_3_128:
    case LT_ALG_SIPHASH_2_4_128: return 16;
    case LT_ALG_SIPHASH_1_3_64:
    case LT_ALG_SIPHASH_2_4_64: return 8;
    default: return 0;
    }
}

size_t lt_key_size(int algorithm) {
    switch (algorithm) {
    case LT_ALG_SIPHASH_1_3_128:
    case LT_ALG_SIPHASH_2_4_128:
    case LT_ALG_SIPHASH_1_3_64:
    case LT_ALG_SIPHASH_2_4_64: return 16;
    default: return 0;
    }
}

size_t lt_record_size(int algorithm) {
    size_t d = lt_digest_size(algorithm);
    return d ? LT_RECORD_FIXED + d : 0;
}

int lt_digest(int algorithm, const uint8_t *key, const uint8_t *msg, size_t len, uint8_t *out) {
    switch (algorithm) {
    case LT_ALG_SIPHASH_1_3_128: lt_siphash128(key, msg, len, 1, 3, out); return LT_OK;
    case LT_ALG_SIPHASH_2_4_128: lt_siphash128(key, msg, len, 2, 4, out); return LT_OK;
    case LT_ALG_SIPHASH_1_3_64: lt_store_le64(out, lt_siphash64(key, msg, len, 1, 3)); return LT_OK;
    case LT_ALG_SIPHASH_2_4_64: lt_store_le64(out, lt_siphash64(key, msg, len, 2, 4)); return LT_OK;
    default: return LT_ERR_ARG;
    }
}

#include <time.h>

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int lt_bench_digest(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                    uint64_t count, uint64_t *elapsed_ns, uint8_t *sink) {
    size_t ds = lt_digest_size(algorithm);
    if (!ds || size > buf_len) return LT_ERR_ARG;
    uint8_t out[32] = {0}, acc[16] = {0};
    size_t slots = buf_len - size + 1, pos = 0;
    uint64_t t0 = mono_ns();
    for (uint64_t i = 0; i < count; i++) {
        lt_digest(algorithm, key, buf + pos, size, out);
        for (size_t k = 0; k < 16 && k < ds; k++) acc[k] ^= out[k];
        pos += 64;  /* step through the buffer like consecutive frames would */
        if (pos >= slots) pos = 0;
    }
    *elapsed_ns = mono_ns() - t0;
    memcpy(sink, acc, 16);
    return LT_OK;
}
