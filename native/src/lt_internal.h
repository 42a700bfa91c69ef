/* Private helpers shared by the native sources (not part of the public API). */
#ifndef LT_INTERNAL_H
#define LT_INTERNAL_H

#include <setjmp.h>
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

/* Zero key material. A memset of a buffer that is freed or goes out of scope next is a dead store
 * the compiler may remove (GCC does for lt_engine_free's); explicit_bzero (glibc >= 2.25, musl, the
 * BSDs) may not be removed, and elsewhere memset is called through a volatile function pointer,
 * which the compiler cannot see through. */
/* Records a segment and a Merkle leaf hold: the engine's (48 or 64 bytes, any leaf size), or window
 * records (docs/ledger-format.md "Window records"), one per leaf. */
static inline int lt_segment_record_ok(size_t record_size, size_t leaf_records) {
    if (record_size == LT_RECORD_FIXED + 16 || record_size == LT_RECORD_FIXED + 32) return 1;
    return leaf_records == 1 && record_size >= LT_WINDOW_HEADER + 3 * 28 &&
           record_size <= LT_WINDOW_HEADER + (size_t)LT_WINDOW_MAX_CELLS * 44;
}

static inline void lt_wipe(void *p, size_t n) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 25))
    explicit_bzero(p, n);
#else
    static void *(*const volatile set)(void *, int, size_t) = memset;
    set(p, 0, n);
#endif
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

/* reader.c: SIGBUS guard for reads of a file reader's map (why: the comment above on_sigbus in
 * reader.c). Use, in the function that reads the map:
 *     lt_bus_guard g;
 *     lt_bus_guard_push(&g, r);
 *     if (sigsetjmp(g.jb, 0)) { ... the map shrank at byte g.fault (g is popped already) ...; }
 *     ... read the map; no locks taken, nothing allocated ...
 *     lt_bus_guard_pop(&g);
 * Guards nest per thread; a reader that is not a file (no map) never faults this way. */
typedef struct lt_bus_guard {
    sigjmp_buf jb;
    const uint8_t *lo;          /* the map: [lo, lo + len) */
    size_t len;
    volatile size_t fault;      /* byte offset in the file of the access that faulted */
    struct lt_bus_guard *outer;
} lt_bus_guard;
void lt_bus_guard_push(lt_bus_guard *g, const lt_reader *r);
void lt_bus_guard_pop(lt_bus_guard *g);
/* Fail a file reader for good (sticky LT_ERR_IO) because its file shrank under byte `off`, or the
 * storage could not read that byte (EIO): the message says which. */
void lt_reader_fail_shrunk(lt_reader *r, uint64_t off);

/* reader.c: wrap a source in an lt_reader so the engine and Python treat it like a file. */
lt_reader *lt_reader_from_source(const lt_source_ops *ops, void *src, int format);
/* 1 when the frames a reader hands out stay valid across later lt_reader_next calls (files: the
 * map), 0 when they are valid until the next call only (other sources). */
int lt_reader_frames_stable(const lt_reader *r);
/* The source behind a reader when it was made with these ops, else NULL. */
void *lt_reader_source(const lt_reader *r, const lt_source_ops *ops);

/* digest_siphash.c */
void lt_siphash128(const uint8_t key[16], const uint8_t *msg, size_t len, int c_rounds, int d_rounds,
                   uint8_t out[16]);
uint64_t lt_siphash64(const uint8_t key[16], const uint8_t *msg, size_t len, int c_rounds, int d_rounds);

/* strip.c: the range to hash for strip mode `strip` (a valid LT_STRIP_*); returns the flags to add. */
uint16_t lt_strip_range(int strip, uint32_t linktype, const uint8_t *frame, uint32_t caplen, uint32_t wire_len,
                        uint32_t *offset, uint32_t *length);

static inline void lt_store_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void lt_store_be64(uint8_t *p, uint64_t v) {
    lt_store_be32(p, (uint32_t)(v >> 32));
    lt_store_be32(p + 4, (uint32_t)v);
}
static inline uint64_t lt_load_be64(const uint8_t *p) {
    return ((uint64_t)lt_load_be32(p) << 32) | lt_load_be32(p + 4);
}

/* x86-64 CPU paths are compiled with per-function target attributes, so the package builds for
 * any x86-64; define LT_PORTABLE_ONLY to build the portable paths alone (and to check, on x86-64,
 * what an arm64 build compiles). */
#if defined(__x86_64__) && !defined(LT_PORTABLE_ONLY)
#define LT_X86_PATHS 1
#else
#define LT_X86_PATHS 0
#endif
/* arm64: the NEON multi-buffer paths (NEON is baseline on AArch64; the lane code assumes a
 * little-endian host, which every AArch64 Linux distribution is). */
#if defined(__aarch64__) && defined(__ARM_NEON) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
    !defined(LT_PORTABLE_ONLY)
#define LT_NEON_PATHS 1
#else
#define LT_NEON_PATHS 0
#endif

/* A region of functions compiled for an ISA extension (the *_avx2.c / *_avx512.c files):
 * `#pragma GCC target` for GCC, `#pragma clang attribute` for clang, which ignores the GCC pragma
 * (scripts/fuzz.sh builds with clang 14). Their code runs only where cpu.c found the CPU
 * feature. */
#define LT_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define LT_TARGET_BEGIN(isa) LT_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define LT_TARGET_END LT_PRAGMA(clang attribute pop)
#else
#define LT_TARGET_BEGIN(isa) LT_PRAGMA(GCC push_options) LT_PRAGMA(GCC target(isa))
#define LT_TARGET_END LT_PRAGMA(GCC pop_options)
#endif

/* ---- keyed digest contexts (dispatch.c) ----
 * A context holds everything that depends on the key only (AES round keys, GHASH powers, HMAC
 * pad states), so the per-frame call does per-frame work only. `fn` is the CPU path chosen by
 * dispatch when the context was set up; a context never changes path afterwards. */
typedef struct lt_dctx lt_dctx;
typedef void (*lt_digest_fn)(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out);
/* Multi-buffer entry: digest msgs[i] (lens[i] bytes) into out + i * out_stride for i < n. Results are
 * byte-identical to `fn` on each message; lanes are refilled as messages of different lengths end. */
typedef void (*lt_digest_many_fn)(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                                  uint8_t *out, size_t out_stride);

struct lt_dctx {
    lt_digest_fn fn;
    lt_digest_many_fn many; /* NULL: the path has no multi-buffer code; lt_dctx_run_many loops over fn */
    const char *path;      /* name of the CPU path, static string */
    int algorithm;
    size_t out_len;
    union {
        struct { uint8_t key[16]; int c, d; } sip;
        struct {
            uint8_t rk[176];            /* AES-128 round keys, FIPS 197 byte order */
            uint8_t h[16];              /* GHASH key E_K(0^128), GCM byte order */
            uint8_t ek_j0[16];          /* E_K(IV || 0^31 || 1) for the all-zero ledger IV */
            uint64_t hpow[36][2];       /* path-specific precomputation (powers of H) */
        } gmac;
        struct { uint32_t key[8], mode; } b3; /* mode: KEYED_HASH, or 0 (unkeyed) */
        struct { uint32_t istate[8], ostate[8]; } hmac;
    } u __attribute__((aligned(16)));
};

/* Set up `c` for `algorithm` with the CPU path currently selected for it. LT_OK or LT_ERR_ARG. */
int lt_dctx_init(lt_dctx *c, int algorithm, const uint8_t *key);
static inline void lt_dctx_run(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    c->fn(c, msg, len, out);
}
/* The batch entry the engine uses: the path's multi-buffer code, or one fn call per message. */
static inline void lt_dctx_run_many(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                                    uint8_t *out, size_t out_stride) {
    if (c->many) {
        c->many(c, msgs, lens, n, out, out_stride);
        return;
    }
    for (size_t i = 0; i < n; i++) c->fn(c, msgs[i], lens[i], out + i * out_stride);
}

/* One CPU path of one algorithm family. `supported` is NULL for the portable path.
 * init: c->algorithm and c->out_len are set before the call. key_len is the algorithm's key size
 * except for the test entry points (HMAC takes any key length); iv is NULL except for the GMAC
 * test entry point (NULL = the ledger's all-zero 96-bit IV). */
typedef struct {
    const char *name;
    int (*supported)(void);
    void (*init)(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv);
    lt_digest_fn digest;
    lt_digest_many_fn many;  /* NULL: no multi-buffer code on this path */
} lt_cpu_impl;

/* Path tables, best first, portable last, terminated by an entry with a NULL name. */
extern const lt_cpu_impl lt_siphash_impls[];
extern const lt_cpu_impl lt_gmac_impls[];
extern const lt_cpu_impl lt_blake3_impls[];
extern const lt_cpu_impl lt_hmac_impls[];

/* The implementation currently selected for an algorithm (NULL for an unknown id). */
const lt_cpu_impl *lt_dispatch_impl(int algorithm);

/* digest_gmac.c: table-free, constant-time AES-128 (FIPS 197) key expansion and block encryption,
 * also the portable path of multiset_hash.c */
void lt_aes128_expand(const uint8_t key[16], uint8_t rk[176]);
void lt_aes128_encrypt_portable(const uint8_t rk[176], const uint8_t in[16], uint8_t out[16]);
/* multiset_hash.c: F(digest) of n records (AES-128 of a 16-byte digest, the fixed-length
 * CBC-MAC of a longer one), 16 bytes each into out; aesni 1 takes the AES-NI path (the caller
 * checked the CPU) */
void lt_mset_prf(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride, size_t off,
                 size_t dsize, int aesni, uint8_t *out);

/* window.c: an accumulator's window record size and digest size (engine.c's
 * lt_engine_fill_window) */
void lt_window_acc_sizes(const lt_window_acc *a, size_t *rsize, size_t *dsize);

/* window_vaes.c: lt_mset_prf's element map on AVX-512 VAES, sixteen blocks in flight (the
 * caller checked lt_cpu_has_vaes_avx512); ostride 16: F values only, 16 bytes each (lt_mset_prf's
 * output), ostride 32 (16-byte digests only): each F followed by its digest */
void lt_window_prf_vaes(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride,
                        size_t off, size_t dsize, uint8_t *out, size_t ostride);
/* window_vaes.c: frames [j0, j1) of a chunk of 16-byte-digest records into the window's cells
 * (32-byte aligned) and limb sums (limbs[i]: the sum of the F values' 32-bit limb i), eight at a
 * time, from f as lt_window_prf_vaes writes it with ostride 32; returns the frames done (the
 * rest, under eight, is the caller's) */
size_t lt_window_cells_avx512(uint8_t *cell, uint32_t part, const uint8_t *base, size_t stride,
                              const uint8_t *f, size_t j0, size_t j1, uint64_t limbs[4]);

/* CPU feature probes (cpu.c); the x86 ones are always 0 on non-x86-64 builds. */
int lt_cpu_has_aesni_pclmul(void);
int lt_cpu_has_sha_ni(void);
int lt_cpu_has_sse41(void);
int lt_cpu_has_avx512vl(void);
int lt_cpu_has_avx2(void);
int lt_cpu_has_avx512_mb(void);   /* AVX-512F + VL (+ the OS saving zmm state) */
int lt_cpu_has_vpclmul_avx512(void);  /* AVX-512F/BW/VL + VPCLMULQDQ + AES-NI/PCLMULQDQ */
int lt_cpu_has_vaes_avx512(void);   /* AVX-512F/VL + AVX2 + VAES + AES-NI */
int lt_cpu_has_neon(void);        /* AArch64 Advanced SIMD; always 0 on other builds */

/* digest_siphash_avx2.c, digest_siphash_avx512.c: multi-buffer SipHash (any c/d, 64/128-bit out) */
void lt_siphash_many_avx2(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                          uint8_t *out, size_t out_stride);
void lt_siphash_many_avx512(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                            uint8_t *out, size_t out_stride);

/* digest_blake3_avx2.c, digest_blake3_avx512.c: multi-buffer keyed BLAKE3, the chunks and parent
 * nodes of every frame in lanes (blake3_mb.h); `one` is the path's single compression (cv <- first
 * eight output words), used for tree levels too narrow to fill the lanes */
typedef void (*lt_b3_compress_fn)(uint32_t cv[8], const uint8_t block[64], uint64_t counter, uint32_t block_len,
                                  uint32_t flags);
void lt_blake3_many_avx2(const lt_dctx *c, lt_b3_compress_fn one, const uint8_t *const *msgs, const uint32_t *lens,
                         size_t n, uint8_t *out, size_t out_stride);
void lt_blake3_many_avx512(const lt_dctx *c, lt_b3_compress_fn one, const uint8_t *const *msgs,
                           const uint32_t *lens, size_t n, uint8_t *out, size_t out_stride);

/* digest_gmac_avx512.c: multi-frame AES-128-GMAC; lt_gmac_powers_vpclmul512 finishes the key setup
 * that digest_gmac.c's aesni-pclmul init began */
void lt_gmac_powers_vpclmul512(lt_dctx *c);
void lt_gmac_digest_vpclmul512(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out);
void lt_gmac_many_vpclmul512(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                             uint8_t *out, size_t out_stride);

/* digest_siphash_neon.c, digest_blake3_neon.c (aarch64): the same lane schemes on 128-bit NEON
 * vectors (SipHash: 4 frames as two uint64x2_t groups; BLAKE3: 4 chunks or parent nodes in
 * uint32x4_t lanes, `one` as above) */
void lt_siphash_many_neon(const lt_dctx *c, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                          uint8_t *out, size_t out_stride);
void lt_blake3_many_neon(const lt_dctx *c, lt_b3_compress_fn one, const uint8_t *const *msgs,
                         const uint32_t *lens, size_t n, uint8_t *out, size_t out_stride);

#endif
