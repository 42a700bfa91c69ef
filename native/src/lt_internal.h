/* Private helpers shared by the native sources (not part of the public API). */
#ifndef LT_INTERNAL_H
#define LT_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ledgertool.h"

static inline uint16_t lt_load_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t lt_load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t lt_load_le64(const uint8_t *p) {
    return (uint64_t)lt_load_le32(p) | ((uint64_t)lt_load_le32(p + 4) << 32);
}
static inline uint16_t lt_load_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t lt_load_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline void lt_store_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void lt_store_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void lt_store_le64(uint8_t *p, uint64_t v) {
    lt_store_le32(p, (uint32_t)v);
    lt_store_le32(p + 4, (uint32_t)(v >> 32));
}

static inline void lt_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A frame source other than a capture file (workload generator, live interface). `next` fills up
 * to `max` frames (data valid until the next call) and returns LT_OK with *n > 0, LT_EOF, or an
 * LT_ERR_* after setting info->message / info->error; `close` frees `src`. */
typedef struct {
    int (*next)(void *src, lt_frame *frames, size_t max, size_t *n, lt_reader_info *info);
    void (*close)(void *src);
} lt_source_ops;

/* reader.c: wrap a source in an lt_reader so the engine and Python treat it like a file. */
lt_reader *lt_reader_from_source(const lt_source_ops *ops, void *src, int format);
/* The source behind a reader when it was made with these ops, else NULL. */
void *lt_reader_source(const lt_reader *r, const lt_source_ops *ops);

/* digest_siphash.c */
void lt_siphash128(const uint8_t key[16], const uint8_t *msg, size_t len, int c_rounds, int d_rounds,
                   uint8_t out[16]);
uint64_t lt_siphash64(const uint8_t key[16], const uint8_t *msg, size_t len, int c_rounds, int d_rounds);

#endif
