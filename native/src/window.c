/* Window commitments: one fixed-size record per link and time window that commits to the multiset
 * of the window's frame digests (docs/adr/0012-window-commitments.md; every byte in
 * docs/ledger-format.md, "Window records").
 *
 * Per frame, on the batch of records the engine already holds: F(d) = AES-128 under the window's
 * element key (multiset_hash.c's PRF and AES-NI rounds, eight blocks in flight), added into the
 * keyed multiset hash sum F mod 2^127 - 1, and an invertible Bloom lookup table (k = 3 cells, one
 * in each third of the table, chosen by bits of F) whose cells hold a count, an XOR of the low 64
 * bits of F (the check that recognises a pure cell) and an XOR of the digests. When a window is
 * emitted everything that depends on F is XORed with a one-time pad, AES-128-CTR under the pad key
 * with the window index in the counter block, so storage holds no value a prover could solve for.
 *
 * Window of a record: floor(ts_ns / window_ns), but never earlier than the window already open (or
 * after lt_window_finish, than the one after the last emitted): such a frame is counted in the
 * open window and as `late`. So an index is emitted at most once and a pad is never reused. */
#include "ledgertool.h"
#include "lt_internal.h"

#include <stdlib.h>
#include <string.h>
#if LT_X86_PATHS
#include <immintrin.h>   /* SSE2, baseline on x86-64: the cell updates */
#endif

#define LT_WINDOW_MAGIC "LTWN"
#define CLEAR 64 /* bytes in the clear: the header up to the hash */
#define CHUNK 256          /* records whose F values are computed in one pass */
#define IDX_BITS 21        /* bits of F's first word per cell index */
#define P_LO UINT64_MAX
#define P_HI (UINT64_MAX >> 1)

struct lt_window_acc {
    uint8_t rkf[176], rkpad[176];
    int path;   /* LT_WINDOW_PATH_PORTABLE, _AESNI or _VAES: the element map's AES */
    uint64_t window_ns;
    uint32_t cells, part;
    size_t dsize, csize, rsize;
    int open, started;
    int64_t cur, floor_index;
    int64_t lo_ns, hi_ns; /* the open window's [start, end) where that fits in an i64, else empty */
    uint64_t frames, wire, drops, late;
    unsigned __int128 lo; /* the window's sum of F values: lo + hi * 2^128 */
    uint64_t hi;
    uint8_t *cell; /* cells of 16 + dsize bytes: count u32, 4 unused, check u64, XOR (host order) */
    uint8_t f[32 * CHUNK]; /* F values, fstride bytes apart */
    size_t fstride;
};

size_t lt_window_record_size(uint32_t cells, size_t digest_size) {
    if (cells == 0 || cells % LT_WINDOW_K || cells > LT_WINDOW_MAX_CELLS ||
        (digest_size != 16 && digest_size != 32))
        return 0;
    return LT_WINDOW_HEADER + (size_t)cells * (12 + digest_size);
}

/* host-order word loads; the XORs are byte-wise, so the byte order matters only for ld64's value */
static inline uint64_t ld64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void xor_bytes(uint8_t *x, const uint8_t *d, size_t n) {
    for (size_t k = 0; k < n; k += 8) {
        uint64_t a, b;
        memcpy(&a, x + k, 8);
        memcpy(&b, d + k, 8);
        a ^= b;
        memcpy(x + k, &a, 8);
    }
}

static inline int64_t floor_div(int64_t ts, uint64_t wns) {
    int64_t w = (int64_t)wns, q = ts / w;
    return (ts % w < 0) ? q - 1 : q;
}

/* the k cells of an element: one in each third, from 21-bit fields of F's first word */
static inline void cell_indices(const uint8_t f[16], uint32_t part, uint32_t idx[LT_WINDOW_K]) {
    uint64_t x = ld64(f);
    for (unsigned j = 0; j < LT_WINDOW_K; j++)
        idx[j] = j * part + (uint32_t)((((x >> (IDX_BITS * j)) & ((1u << IDX_BITS) - 1)) * part) >>
                                       IDX_BITS);
}

static unsigned __int128 reduce(unsigned __int128 lo, uint64_t hi) {
    unsigned __int128 p = ((unsigned __int128)P_HI << 64) | P_LO;
    /* lo + hi * 2^128 = (lo mod 2^127) + (lo >> 127) + 2 hi  (mod p), since 2^127 = 1 */
    unsigned __int128 x = (lo & p) + (lo >> 127) + ((unsigned __int128)hi << 1);
    x = (x & p) + (x >> 127);
    return x >= p ? x - p : x;
}

static void store128(uint8_t *o, unsigned __int128 v) {
    lt_store_le64(o, (uint64_t)v);
    lt_store_le64(o + 8, (uint64_t)(v >> 64));
}

/* XOR bytes [CLEAR, len) of rec with AES_kpad(index || block), block = 0, 1, ... */
static void apply_pad(const uint8_t rkpad[176], int aesni, int64_t index, uint8_t *rec,
                      size_t len) {
    uint8_t ctr[16 * 64], ks[16 * 64];
    size_t at = CLEAR, block = 0;
    while (at < len) {
        size_t nb = (len - at + 15) / 16;
        if (nb > 64)
            nb = 64;
        for (size_t j = 0; j < nb; j++) {
            lt_store_le64(ctr + 16 * j, (uint64_t)index);
            lt_store_le64(ctr + 16 * j + 8, (uint64_t)(block + j));
        }
        lt_mset_prf(rkpad, ctr, nb, 16, 0, 16, aesni, ks);
        for (size_t j = 0; j < 16 * nb && at < len; j++)
            rec[at++] ^= ks[j];
        block += nb;
    }
    memset(ks, 0, sizeof ks);
}

int lt_window_path_supported(int path) {
    switch (path) {
    case LT_WINDOW_PATH_BEST:
    case LT_WINDOW_PATH_PORTABLE: return 1;
    case LT_WINDOW_PATH_AESNI: return lt_mset_accelerated();
#if LT_X86_PATHS
    case LT_WINDOW_PATH_VAES: return lt_cpu_has_vaes_avx512();
#endif
    default: return 0;
    }
}

static int best_path(void) {
    static const int order[] = {LT_WINDOW_PATH_VAES, LT_WINDOW_PATH_AESNI};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        if (lt_window_path_supported(order[i]))
            return order[i];
    return LT_WINDOW_PATH_PORTABLE;
}

const char *lt_window_path_name(const lt_window_acc *a) {
    if (!a)
        return NULL;
    switch (a->path) {
    case LT_WINDOW_PATH_AESNI: return "aesni";
    case LT_WINDOW_PATH_VAES: return "vaes-avx512";
    default: return "portable";
    }
}

/* F of n records' digests, 16 bytes each into out, on the accumulator's path */
static void prf(const lt_window_acc *a, const uint8_t *recs, size_t n, size_t stride, size_t dsize,
                uint8_t *out) {
#if LT_X86_PATHS
    if (a->path == LT_WINDOW_PATH_VAES) {
        lt_window_prf_vaes(a->rkf, recs, n, stride, LT_RECORD_FIXED, dsize, out, a->fstride);
        return;
    }
#endif
    lt_mset_prf(a->rkf, recs, n, stride, LT_RECORD_FIXED, dsize, a->path == LT_WINDOW_PATH_AESNI,
                out);
}

int lt_window_new(const uint8_t key_f[16], const uint8_t key_pad[16], uint64_t window_ns,
                  uint32_t cells, size_t digest_size, int path, lt_window_acc **out) {
    if (!out)
        return LT_ERR_ARG;
    *out = NULL;
    size_t rsize = lt_window_record_size(cells, digest_size);
    if (path == LT_WINDOW_PATH_BEST)
        path = best_path();
    if (!key_f || !key_pad || window_ns == 0 || window_ns > INT64_MAX || rsize == 0 ||
        !lt_window_path_supported(path))
        return LT_ERR_ARG;
    lt_window_acc *a = calloc(1, sizeof *a);
    if (!a)
        return LT_ERR_NOMEM;
    a->cell = aligned_alloc(64, ((size_t)cells * (16 + digest_size) + 63) / 64 * 64);
    if (!a->cell) {
        lt_window_free(a);
        return LT_ERR_NOMEM;
    }
    lt_aes128_expand(key_f, a->rkf);
    lt_aes128_expand(key_pad, a->rkpad);
    a->path = path;
    a->window_ns = window_ns;
    a->cells = cells;
    a->part = cells / LT_WINDOW_K;
    a->dsize = digest_size;
    a->csize = 12 + digest_size;
    a->rsize = rsize;
    /* the VAES path with 16-byte digests keeps each F next to its digest: the cell update's
     * (0, check, digest) is one masked load */
    a->fstride = path == LT_WINDOW_PATH_VAES && digest_size == 16 ? 32 : 16;
    *out = a;
    return LT_OK;
}

void lt_window_free(lt_window_acc *a) {
    if (!a)
        return;
    if (a->cell)
        memset(a->cell, 0, (size_t)a->cells * (16 + a->dsize));
    free(a->cell);
    memset(a, 0, sizeof *a);   /* the round keys */
    free(a);
}

static void open_window(lt_window_acc *a, int64_t w) {
    a->open = a->started = 1;
    a->cur = w;
    int64_t wns = (int64_t)a->window_ns;
    if (__builtin_mul_overflow(w, wns, &a->lo_ns) ||
        __builtin_add_overflow(a->lo_ns, wns, &a->hi_ns))
        a->lo_ns = a->hi_ns = 0;
    a->frames = a->wire = a->drops = a->late = 0;
    a->lo = 0;
    a->hi = 0;
    memset(a->cell, 0, (size_t)a->cells * (16 + a->dsize));
}

static void emit(lt_window_acc *a, uint8_t *rec) {
    memset(rec, 0, LT_WINDOW_HEADER);
    memcpy(rec, LT_WINDOW_MAGIC, 4);
    rec[4] = LT_WINDOW_VERSION;
    rec[5] = LT_WINDOW_K;
    lt_store_le16(rec + 6, (uint16_t)a->dsize);
    lt_store_le32(rec + 8, a->cells);
    lt_store_le64(rec + 16, a->window_ns);
    lt_store_le64(rec + 24, (uint64_t)a->cur);
    lt_store_le64(rec + 32, a->frames);
    lt_store_le64(rec + 40, a->wire);
    lt_store_le64(rec + 48, a->drops);
    lt_store_le64(rec + 56, a->late);
    store128(rec + 64, reduce(a->lo, a->hi));
    uint8_t *c = rec + LT_WINDOW_HEADER;
    for (uint32_t i = 0; i < a->cells; i++, c += a->csize) {
        const uint8_t *from = a->cell + (size_t)i * (16 + a->dsize);
        uint32_t count;
        uint64_t check;
        memcpy(&count, from, 4);
        memcpy(&check, from + 8, 8);
        lt_store_le32(c, count);
        lt_store_le64(c + 4, check);
        memcpy(c + 12, from + 16, a->dsize);
    }
    apply_pad(a->rkpad, a->path != LT_WINDOW_PATH_PORTABLE, a->cur, rec, a->rsize);
    a->open = 0;
    a->floor_index = a->cur + 1;
}

/* The running sums and cells of the open window, in locals: stores through uint8_t pointers (the
 * digest XORs) may alias any field of the accumulator, so the loop would otherwise reload and
 * store them for every frame. */
typedef struct {
    uint64_t s0, s1, s2; /* the sum of F values, 192 bits, low word first */
    uint64_t frames, wire;
    uint8_t *cell;
    uint32_t part;
} window_run;

/* limb sums l0..l3 (each below 2^64 - 2^32: at most 2^32 values) of 32-bit limbs of F values
 * into the 192-bit sum: l0 + l1 2^32 + l2 2^64 + l3 2^96 */
static inline void sum_limbs(window_run *w, uint64_t l0, uint64_t l1, uint64_t l2, uint64_t l3) {
    /* = t + u * 2^64, t and u below 2^97 */
    unsigned __int128 t = (unsigned __int128)l0 + ((unsigned __int128)l1 << 32);
    unsigned __int128 u = (unsigned __int128)l2 + ((unsigned __int128)l3 << 32);
    unsigned __int128 x = (unsigned __int128)w->s0 + (uint64_t)t;
    w->s0 = (uint64_t)x;
    x = (unsigned __int128)w->s1 + (uint64_t)(t >> 64) + (uint64_t)u + (uint64_t)(x >> 64);
    w->s1 = (uint64_t)x;
    w->s2 += (uint64_t)(x >> 64) + (uint64_t)(u >> 64);
}

/* the F values f[j0 .. j1) (at most CHUNK) into the 192-bit sum: 32-bit limbs summed in 64-bit
 * words (no carries within a chunk; the loop vectorises), then added once */
static inline void sum_range(window_run *w, const uint8_t *f, size_t fs, size_t j0, size_t j1) {
    uint64_t l0 = 0, l1 = 0, l2 = 0, l3 = 0;
    for (size_t j = j0; j < j1; j++) {
        uint64_t a = ld64(f + fs * j), b = ld64(f + fs * j + 8);
        l0 += (uint32_t)a, l1 += a >> 32, l2 += (uint32_t)b, l3 += b >> 32;
    }
    sum_limbs(w, l0, l1, l2, l3);
}

/* one frame's k cells: count + 1, check ^= F's second word, XOR ^= the digest */
static inline void add_cells(window_run *w, const uint8_t *r, const uint8_t f[16], size_t dsize) {
    uint64_t chk = ld64(f + 8);
    uint32_t idx[LT_WINDOW_K];
    cell_indices(f, w->part, idx);
    const uint8_t *d = r + LT_RECORD_FIXED;
    for (unsigned j = 0; j < LT_WINDOW_K; j++) {
        uint8_t *c = w->cell + (size_t)idx[j] * (16 + dsize);
        uint32_t n;
        uint64_t k;
        memcpy(&n, c, 4);
        memcpy(&k, c + 8, 8);
        n++, k ^= chk;
        memcpy(c, &n, 4);
        memcpy(c + 8, &k, 8);
        xor_bytes(c + 16, d, dsize);
    }
}

/* one frame (outside the fast path's runs) into the sum, the counters and the cells */
static inline void add_frame(window_run *w, const uint8_t *r, const uint8_t f[16], size_t dsize) {
    sum_range(w, f, 16, 0, 1);
    w->frames++;
    w->wire += lt_load_le32(r + 16);
    add_cells(w, r, f, dsize);
}

static inline void run_load(window_run *w, const lt_window_acc *a) {
    *w = (window_run){(uint64_t)a->lo, (uint64_t)(a->lo >> 64), a->hi, a->frames, a->wire,
                      a->cell, a->part};
}

static inline void run_store(const window_run *w, lt_window_acc *a) {
    a->lo = ((unsigned __int128)w->s1 << 64) | w->s0;
    a->hi = w->s2, a->frames = w->frames, a->wire = w->wire;
}

/* a record outside the open window's fast path: a GAP, another window, or no window open yet.
 * 0 when it would close a window and out has no room left. */
static int add_slow(lt_window_acc *a, const uint8_t *r, const uint8_t *f, uint8_t *out, size_t max,
                    size_t *emitted) {
    int64_t w = floor_div((int64_t)ld64(r + 8), a->window_ns);
    int late = 0;
    if (a->open && w > a->cur) {
        if (*emitted == max)
            return 0;
        emit(a, out + (*emitted)++ * a->rsize);
    }
    if (a->open && w < a->cur)
        w = a->cur, late = 1;
    else if (!a->open && a->started && w < a->floor_index)
        w = a->floor_index, late = 1;
    if (!a->open)
        open_window(a, w);
    if (lt_load_le16(r + 24) & LT_FLAG_GAP) {
        a->drops += lt_load_le32(r + 28);
        return 1;
    }
    a->late += (uint64_t)late;
    window_run run;
    run_load(&run, a);
    add_frame(&run, r, f, a->dsize);
    run_store(&run, a);
    return 1;
}

/* The fast path over frames [j, m) of a chunk: the end of the run of frames in [lo, hi) that are
 * not GAP records, their wire bytes added to *wire */
static inline size_t run_end(const uint8_t *base, size_t j, size_t m, size_t stride, int64_t lo,
                             int64_t hi, uint64_t *wire) {
    /* lo <= ts < hi: ts - lo < span (none when hi <= lo) */
    uint64_t w = 0, span = hi > lo ? (uint64_t)hi - (uint64_t)lo : 0;
    /* eight records a step, branch-free within it: the whole step counts when none of its
     * records ends the run (the common case), else the records up to the one that does */
    for (; j + 8 <= m; j += 8) {
        const uint8_t *r = base + j * stride;
        uint64_t bad = 0, w8 = 0;
        for (unsigned i = 0; i < 8; i++, r += stride) {
            bad |= ((uint64_t)ld64(r + 8) - (uint64_t)lo >= span) |
                   (uint64_t)(lt_load_le16(r + 24) & LT_FLAG_GAP);
            w8 += lt_load_le32(r + 16);
        }
        if (bad)
            break;
        w += w8;
    }
    for (; j < m; j++) {
        const uint8_t *r = base + j * stride;
        int64_t ts = (int64_t)ld64(r + 8);
        if (ts < lo || ts >= hi || (lt_load_le16(r + 24) & LT_FLAG_GAP))
            break;
        w += lt_load_le32(r + 16);
    }
    *wire += w;
    return j;
}

/* frames [j0, j1) of a chunk into their k cells each */
static inline void cells_range(window_run *w, const uint8_t *base, size_t stride, const uint8_t *f,
                               size_t fs, size_t j0, size_t j1, size_t dsize) {
#if LT_X86_PATHS
    if (dsize == 16) {   /* a cell is two 16-byte halves: (count, 0, check) and the XOR */
        const __m128i one = _mm_set_epi32(0, 0, 0, 1);
        for (size_t j = j0; j < j1; j++) {
            uint32_t idx[LT_WINDOW_K];
            cell_indices(f + fs * j, w->part, idx);
            __m128i chk = _mm_unpackhi_epi64(_mm_setzero_si128(),
                                             _mm_loadu_si128((const __m128i *)(f + fs * j)));
            __m128i d = _mm_loadu_si128((const __m128i *)(base + j * stride + LT_RECORD_FIXED));
            for (unsigned k = 0; k < LT_WINDOW_K; k++) {
                __m128i *c = (__m128i *)(w->cell + (size_t)idx[k] * 32);
                _mm_store_si128(c, _mm_xor_si128(_mm_add_epi32(_mm_load_si128(c), one), chk));
                _mm_store_si128(c + 1, _mm_xor_si128(_mm_load_si128(c + 1), d));
            }
        }
        return;
    }
#endif
    for (size_t j = j0; j < j1; j++)
        add_cells(w, base + j * stride, f + fs * j, dsize);
}

int lt_window_add(lt_window_acc *a, const uint8_t *records, size_t n, size_t stride, uint8_t *out,
                  size_t out_len, size_t *n_out, size_t *consumed) {
    if (!a || !n_out || !consumed || (n && !records) || stride < LT_RECORD_FIXED + a->dsize ||
        (n && n > SIZE_MAX / stride) || (out_len && !out))
        return LT_ERR_ARG;
    size_t max = out_len / a->rsize, emitted = 0, i = 0, dsize = a->dsize;
    *n_out = *consumed = 0;
    while (i < n) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        const uint8_t *base = records + i * stride;
        prf(a, base, m, stride, dsize, a->f);
        size_t j = 0;
        while (j < m) {
            /* the common case: a run of frames of the open window, summed in locals */
            window_run run;
            run_load(&run, a);
            int64_t lo = a->open ? a->lo_ns : 1, hi = a->open ? a->hi_ns : 0;
            size_t e = run_end(base, j, m, stride, lo, hi, &run.wire);
            if (e > j) {
                size_t at = j;
#if LT_X86_PATHS
                if (a->path == LT_WINDOW_PATH_VAES && dsize == 16) {
                    uint64_t l[4];
                    at += lt_window_cells_avx512(run.cell, run.part, base, stride, a->f, j, e, l);
                    sum_limbs(&run, l[0], l[1], l[2], l[3]);
                }
#endif
                sum_range(&run, a->f, a->fstride, at, e);
                cells_range(&run, base, stride, a->f, a->fstride, at, e, dsize);
                run.frames += e - j;
            }
            run_store(&run, a);
            j = e;
            if (j < m) {
                if (!add_slow(a, base + j * stride, a->f + a->fstride * j, out, max, &emitted)) {
                    *n_out = emitted;
                    *consumed = i + j;
                    return LT_OK;
                }
                j++;
            }
        }
        i += m;
    }
    *n_out = emitted;
    *consumed = n;
    return LT_OK;
}

void lt_window_acc_sizes(const lt_window_acc *a, size_t *rsize, size_t *dsize) {
    *rsize = a->rsize;
    *dsize = a->dsize;
}

int lt_window_finish(lt_window_acc *a, uint8_t *out, size_t out_len, size_t *n_out) {
    if (!a || !n_out)
        return LT_ERR_ARG;
    *n_out = 0;
    if (!a->open)
        return LT_OK;
    if (!out || out_len < a->rsize)
        return LT_ERR_ARG;
    emit(a, out);
    *n_out = 1;
    return LT_OK;
}

/* the header fields a record's size follows from; 0 when they are not a window record's */
static size_t checked_size(const uint8_t *rec, size_t len) {
    if (!rec || len < LT_WINDOW_HEADER || memcmp(rec, LT_WINDOW_MAGIC, 4) ||
        rec[4] != LT_WINDOW_VERSION || rec[5] != LT_WINDOW_K)
        return 0;
    size_t size = lt_window_record_size(lt_load_le32(rec + 8), lt_load_le16(rec + 6));
    return size == len ? size : 0;
}

int lt_window_unmask(const uint8_t key_pad[16], uint8_t *record, size_t len) {
    if (!key_pad || !checked_size(record, len))
        return LT_ERR_ARG;
    uint8_t rk[176];
    lt_aes128_expand(key_pad, rk);
    apply_pad(rk, lt_mset_accelerated(), (int64_t)lt_load_le64(record + 24), record, len);
    memset(rk, 0, sizeof rk);
    return LT_OK;
}

typedef struct {
    const uint8_t *rkf;
    int aesni;
    uint32_t cells, part;
    size_t dsize;
    int32_t *cnt;
    uint64_t *chk;
    uint8_t *xr;
} diff_table;

static int all_zero(const uint8_t *p, size_t n) {
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

/* cell i holds exactly one element (count +1 or -1, check and index agreeing): its F into f */
static int pure(const diff_table *t, uint32_t i, uint8_t f[16]) {
    if (t->cnt[i] != 1 && t->cnt[i] != -1)
        return 0;
    lt_mset_prf(t->rkf, t->xr + (size_t)i * t->dsize, 1, t->dsize, 0, t->dsize, t->aesni, f);
    if (lt_load_le64(f + 8) != t->chk[i])
        return 0;
    uint32_t idx[LT_WINDOW_K];
    cell_indices(f, t->part, idx);
    return idx[i / t->part] == i;   /* cells = K * part: i / part < K */
}

/* the sum of F over the listed digests, mod p */
static unsigned __int128 sum_f(const uint8_t *rkf, int aesni, const uint8_t *d, size_t n,
                               size_t dsize) {
    unsigned __int128 lo = 0;
    uint64_t hi = 0;
    uint8_t f[16];
    for (size_t i = 0; i < n; i++) {
        lt_mset_prf(rkf, d + i * dsize, 1, dsize, 0, dsize, aesni, f);
        unsigned __int128 v = ((unsigned __int128)lt_load_le64(f + 8) << 64) | lt_load_le64(f);
        lo += v;
        hi += lo < v;
    }
    return reduce(lo, hi);
}

static int peel(diff_table *t, uint32_t *stack, size_t cap, uint8_t *lo_out, size_t max_l,
                size_t *nl, uint8_t *co_out, size_t max_c, size_t *nc) {
    size_t top = 0;
    for (uint32_t i = 0; i < t->cells; i++)
        if (t->cnt[i] == 1 || t->cnt[i] == -1)
            stack[top++] = i;
    uint8_t f[16], d[32];
    while (top) {
        uint32_t i = stack[--top];
        if (!pure(t, i, f))
            continue;
        int s = t->cnt[i];
        size_t *n = s > 0 ? nl : nc;
        if (*n == (s > 0 ? max_l : max_c))
            return 0;   /* more differences than the caller has room for */
        memcpy(d, t->xr + (size_t)i * t->dsize, t->dsize);
        memcpy((s > 0 ? lo_out : co_out) + (*n)++ * t->dsize, d, t->dsize);
        uint32_t idx[LT_WINDOW_K];
        cell_indices(f, t->part, idx);
        uint64_t ck = lt_load_le64(f + 8);
        for (unsigned j = 0; j < LT_WINDOW_K; j++) {
            uint32_t c = idx[j];
            t->cnt[c] -= s;
            t->chk[c] ^= ck;
            for (size_t k = 0; k < t->dsize; k++)
                t->xr[(size_t)c * t->dsize + k] ^= d[k];
            if (top < cap)
                stack[top++] = c;
        }
    }
    for (uint32_t i = 0; i < t->cells; i++)
        if (t->cnt[i] || t->chk[i])
            return 0;
    return all_zero(t->xr, (size_t)t->cells * t->dsize);
}

int lt_window_decode(const uint8_t key_f[16], const uint8_t *ledger, const uint8_t *capture,
                     size_t len, uint8_t *ledger_only, size_t max_ledger, size_t *n_ledger,
                     uint8_t *capture_only, size_t max_capture, size_t *n_capture,
                     int *complete) {
    if (!key_f || !n_ledger || !n_capture || !complete || !checked_size(ledger, len) ||
        !checked_size(capture, len) || memcmp(ledger + 6, capture + 6, 6) ||
        (max_ledger && !ledger_only) || (max_capture && !capture_only))
        return LT_ERR_ARG;
    *n_ledger = *n_capture = 0;
    *complete = 0;
    diff_table t = {0};
    uint8_t rkf[176];
    lt_aes128_expand(key_f, rkf);
    t.rkf = rkf;
    t.aesni = lt_mset_accelerated();
    t.cells = lt_load_le32(ledger + 8);
    t.part = t.cells / LT_WINDOW_K;
    t.dsize = lt_load_le16(ledger + 6);
    size_t csize = 12 + t.dsize, cap = t.cells + LT_WINDOW_K * (max_ledger + max_capture) + 1;
    t.cnt = malloc(t.cells * sizeof *t.cnt);
    t.chk = malloc(t.cells * sizeof *t.chk);
    t.xr = malloc(t.cells * t.dsize);
    uint32_t *stack = cap <= SIZE_MAX / sizeof *stack ? malloc(cap * sizeof *stack) : NULL;
    int rc = LT_ERR_NOMEM;
    if (!t.cnt || !t.chk || !t.xr || !stack)
        goto done;
    for (uint32_t i = 0; i < t.cells; i++) {
        const uint8_t *a = ledger + LT_WINDOW_HEADER + i * csize;
        const uint8_t *b = capture + LT_WINDOW_HEADER + i * csize;
        t.cnt[i] = (int32_t)(lt_load_le32(a) - lt_load_le32(b));
        t.chk[i] = lt_load_le64(a + 4) ^ lt_load_le64(b + 4);
        for (size_t k = 0; k < t.dsize; k++)
            t.xr[(size_t)i * t.dsize + k] = a[12 + k] ^ b[12 + k];
    }
    rc = LT_OK;
    if (!peel(&t, stack, cap, ledger_only, max_ledger, n_ledger, capture_only, max_capture,
              n_capture))
        goto done;
    /* exactness: the decoded sets must explain the frame counts and the hashes in full */
    unsigned __int128 p = ((unsigned __int128)P_HI << 64) | P_LO;
    unsigned __int128 hl = ((unsigned __int128)lt_load_le64(ledger + 72) << 64) |
                           lt_load_le64(ledger + 64);
    unsigned __int128 hc = ((unsigned __int128)lt_load_le64(capture + 72) << 64) |
                           lt_load_le64(capture + 64);
    unsigned __int128 sl = sum_f(rkf, t.aesni, ledger_only, *n_ledger, t.dsize);
    unsigned __int128 sc = sum_f(rkf, t.aesni, capture_only, *n_capture, t.dsize);
    if (hl >= p || hc >= p)
        goto done;
    /* hl - hc == sl - sc (mod p)  <=>  hl + sc == hc + sl (mod p) */
    int same_hash = reduce(hl + sc, 0) == reduce(hc + sl, 0);
    uint64_t fl = lt_load_le64(ledger + 32), fc = lt_load_le64(capture + 32);
    *complete = same_hash && fl - fc == (uint64_t)*n_ledger - (uint64_t)*n_capture;
done:
    free(t.cnt);
    free(t.chk);
    if (t.xr)
        memset(t.xr, 0, t.cells * t.dsize);
    free(t.xr);
    free(stack);
    memset(rkf, 0, sizeof rkf);
    return rc;
}
