/* A multiset hash of record digests: MSet-Add-Hash (D. Clarke, S. Devadas, M. van Dijk,
 * B. Gassend, G. E. Suh, "Incremental Multiset Hash Functions and Their Application to Memory
 * Integrity Checking", ASIACRYPT 2003, s3.2), with AES-128 under a key the verifier draws at
 * random for one run as the pseudorandom function and the sum taken modulo p = 2^127 - 1.
 *
 * recompute's fast verdict (ledgertool/reconcile/msethash.py, docs/adr/0011) compares the hash
 * and the count of the ledger's frame records with those of the recomputed capture: equal means
 * every frame matched, except with probability at most 3 / (2^128 - q) for 16-byte digests (q
 * distinct digests; the proof is in the ADR). Anything else goes to the exact pairing.
 *
 * F(d) = AES_k(d) for a 16-byte digest; for a 32-byte one the fixed-length CBC-MAC
 * AES_k(AES_k(d[0:16]) ^ d[16:32]). The values are summed as 128-bit integers (bytes read little
 * endian) in 192 bits and reduced once per call: 2^127 = 1 (mod p), so 2^128 = 2.
 *
 * Paths: AES-NI with eight blocks in flight (the rounds of one block are a dependency chain of
 * four-cycle instructions), and the portable constant-time AES of digest_gmac.c everywhere else. */
#include "ledgertool.h"
#include "lt_internal.h"

#include <string.h>

#define FLAGS_OFFSET 24 /* the record's u16 flags (docs/ledger-format.md, "Records") */
#define BATCH 8

typedef struct {
    uint64_t lo, mid, hi; /* a 192-bit sum of 128-bit values */
} sum192;

static inline void add128(sum192 *s, const uint8_t v[16]) {
    uint64_t a = lt_load_le64(v), b = lt_load_le64(v + 8);
    unsigned __int128 t = (unsigned __int128)s->lo + a;
    s->lo = (uint64_t)t;
    t = (unsigned __int128)s->mid + b + (uint64_t)(t >> 64);
    s->mid = (uint64_t)t;
    s->hi += (uint64_t)(t >> 64);
}

#define P_LO UINT64_MAX
#define P_HI (UINT64_MAX >> 1)

/* (acc + s) mod p, acc < p */
static void reduce_into(uint64_t acc[2], const sum192 *s) {
    /* s = hi * 2^128 + mid * 2^64 + lo = 2 * hi + (bit 127) + (the low 127 bits)  (mod p) */
    unsigned __int128 low = ((unsigned __int128)(s->mid & P_HI) << 64) | s->lo;
    unsigned __int128 x = low + (s->mid >> 63) + ((unsigned __int128)s->hi << 1);   /* < 2^127 + 2^66 */
    unsigned __int128 p = ((unsigned __int128)P_HI << 64) | P_LO;
    x = (x & p) + (x >> 127);
    x += ((unsigned __int128)acc[1] << 64) | acc[0];   /* < 2^128 */
    x = (x & p) + (x >> 127);
    if (x >= p)
        x -= p;
    acc[0] = (uint64_t)x;
    acc[1] = (uint64_t)(x >> 64);
}

static inline int skipped(const uint8_t *rec, uint16_t skip_flags) {
    return (((uint16_t)rec[FLAGS_OFFSET] | (uint16_t)(rec[FLAGS_OFFSET + 1] << 8)) & skip_flags) != 0;
}

/* The part of a digest: the top `bits` bits of (first 8 bytes, little endian, ^ pk[0]) * (pk[1] | 1),
 * a keyed multiply-shift hash (ledgertool/reconcile/msethash.py computes the same in numpy). */
static inline size_t part_of(const uint8_t *digest, const uint64_t pk[2], unsigned bits) {
    return bits ? (size_t)(((lt_load_le64(digest) ^ pk[0]) * (pk[1] | 1)) >> (64 - bits)) : 0;
}

/* The product whose top bits are the part: its top 16 bits are lt_mset_add_parts_ids's ids */
static inline uint64_t part_hash(const uint8_t *digest, const uint64_t pk[2]) {
    return (lt_load_le64(digest) ^ pk[0]) * (pk[1] | 1);
}

/* acc = (acc + v) mod p, acc < p, v any 128-bit value (words low first) */
static inline void add_mod_p(uint64_t acc[2], const uint64_t v[2]) {
    unsigned __int128 p = ((unsigned __int128)P_HI << 64) | P_LO;
    unsigned __int128 x = ((unsigned __int128)v[1] << 64) | v[0];
    x = (x & p) + (x >> 127); /* <= p + 1 */
    x += ((unsigned __int128)acc[1] << 64) | acc[0]; /* < 2p + 1 < 2^128 */
    x = (x & p) + (x >> 127);
    if (x >= p)
        x -= p;
    acc[0] = (uint64_t)x;
    acc[1] = (uint64_t)(x >> 64);
}

static uint64_t parts_portable(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride, size_t off,
                           size_t dsize, uint16_t skip_flags, const uint64_t pk[2], unsigned bits, uint64_t *acc,
                           uint64_t *count, uint16_t *ids) {
    uint64_t added = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = recs + i * stride;
        if (ids)
            ids[i] = (uint16_t)(part_hash(r + off, pk) >> 48);
        if (skipped(r, skip_flags))
            continue;
        uint8_t b[16];
        lt_aes128_encrypt_portable(rk, r + off, b);
        for (size_t k = 16; k < dsize; k += 16) {
            for (int j = 0; j < 16; j++)
                b[j] ^= r[off + k + j];
            lt_aes128_encrypt_portable(rk, b, b);
        }
        uint64_t v[2] = {lt_load_le64(b), lt_load_le64(b + 8)};
        size_t part = part_of(r + off, pk, bits);
        add_mod_p(acc + 2 * part, v);
        count[part]++;
        added++;
    }
    return added;
}

static void sum_portable(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride, size_t off,
                         size_t dsize, uint16_t skip_flags, sum192 *s, uint64_t *count) {
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = recs + i * stride;
        if (skipped(r, skip_flags))
            continue;
        uint8_t b[16];
        lt_aes128_encrypt_portable(rk, r + off, b);
        for (size_t k = 16; k < dsize; k += 16) {   /* CBC-MAC over the digest's further blocks */
            for (int j = 0; j < 16; j++)
                b[j] ^= r[off + k + j];
            lt_aes128_encrypt_portable(rk, b, b);
        }
        add128(s, b);
        ++*count;
    }
}

#if LT_X86_PATHS
#include <immintrin.h>
#define TGT __attribute__((target("aes,sse2")))

TGT static inline __m128i enc1(const __m128i k[11], __m128i b) {
    b = _mm_xor_si128(b, k[0]);
    for (int r = 1; r < 10; r++)
        b = _mm_aesenc_si128(b, k[r]);
    return _mm_aesenclast_si128(b, k[10]);
}

/* eight blocks round by round: each block's rounds are a chain of 4-cycle instructions, so
 * eight chains keep the AES units busy */
#define R8(op, key)                                                                                                  \
    do {                                                                                                             \
        b0 = op(b0, key), b1 = op(b1, key), b2 = op(b2, key), b3 = op(b3, key);                                     \
        b4 = op(b4, key), b5 = op(b5, key), b6 = op(b6, key), b7 = op(b7, key);                                     \
    } while (0)
#define LOAD8(k_)                                                                                                    \
    do {                                                                                                             \
        b0 = _mm_xor_si128(b0, _mm_loadu_si128((const __m128i *)(at[0] + (k_))));                                    \
        b1 = _mm_xor_si128(b1, _mm_loadu_si128((const __m128i *)(at[1] + (k_))));                                    \
        b2 = _mm_xor_si128(b2, _mm_loadu_si128((const __m128i *)(at[2] + (k_))));                                    \
        b3 = _mm_xor_si128(b3, _mm_loadu_si128((const __m128i *)(at[3] + (k_))));                                    \
        b4 = _mm_xor_si128(b4, _mm_loadu_si128((const __m128i *)(at[4] + (k_))));                                    \
        b5 = _mm_xor_si128(b5, _mm_loadu_si128((const __m128i *)(at[5] + (k_))));                                    \
        b6 = _mm_xor_si128(b6, _mm_loadu_si128((const __m128i *)(at[6] + (k_))));                                    \
        b7 = _mm_xor_si128(b7, _mm_loadu_si128((const __m128i *)(at[7] + (k_))));                                    \
    } while (0)

/* a 128-bit value into the 192-bit sum (lo: the low 128 bits, *hi: the carries) */
TGT static inline void acc128(unsigned __int128 *lo, uint64_t *hi, __m128i b) {
    unsigned __int128 v = ((unsigned __int128)(uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(b, b)) << 64) |
                          (uint64_t)_mm_cvtsi128_si64(b);
    *lo += v;
    *hi += *lo < v;
}

TGT static void sum_aesni(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride, size_t off,
                          size_t dsize, uint16_t skip_flags, sum192 *s, uint64_t *count) {
    __m128i k[11];
    const uint8_t *at[BATCH];
    for (int r = 0; r < 11; r++)
        k[r] = _mm_loadu_si128((const __m128i *)(rk + 16 * r));
    unsigned __int128 lo = 0;
    uint64_t hi = 0, done = 0;
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = recs + i * stride;
        if (skipped(r, skip_flags))
            continue;
        at[m++] = r + off;
        if (m < BATCH)
            continue;
        __m128i b0 = _mm_setzero_si128(), b1 = b0, b2 = b0, b3 = b0, b4 = b0, b5 = b0, b6 = b0, b7 = b0;
        for (size_t kk = 0; kk < dsize; kk += 16) {   /* CBC-MAC: the first chaining value is 0 */
            LOAD8(kk);
            R8(_mm_xor_si128, k[0]);
            for (int rr = 1; rr < 10; rr++)
                R8(_mm_aesenc_si128, k[rr]);
            R8(_mm_aesenclast_si128, k[10]);
        }
        acc128(&lo, &hi, b0), acc128(&lo, &hi, b1), acc128(&lo, &hi, b2), acc128(&lo, &hi, b3);
        acc128(&lo, &hi, b4), acc128(&lo, &hi, b5), acc128(&lo, &hi, b6), acc128(&lo, &hi, b7);
        done += BATCH;
        m = 0;
    }
    for (int j = 0; j < m; j++) {   /* the last few, one at a time */
        __m128i b = _mm_setzero_si128();
        for (size_t kk = 0; kk < dsize; kk += 16)
            b = enc1(k, _mm_xor_si128(b, _mm_loadu_si128((const __m128i *)(at[j] + kk))));
        acc128(&lo, &hi, b);
    }
    *count += done + (uint64_t)m;
    uint8_t low[16];   /* into the caller's 192-bit sum */
    for (int j = 0; j < 16; j++)
        low[j] = (uint8_t)(lo >> (8 * j));
    add128(s, low);
    s->hi += hi;
}

/* lt_mset_add_parts: each record's F into the accumulator of its part, eight blocks in flight */
TGT static uint64_t parts_aesni(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride, size_t off,
                            size_t dsize, uint16_t skip_flags, const uint64_t pk[2], unsigned bits, uint64_t *acc,
                            uint64_t *count, uint16_t *ids) {
    __m128i k[11];
    const uint8_t *at[BATCH];
    size_t pt[BATCH];
    for (int r = 0; r < 11; r++)
        k[r] = _mm_loadu_si128((const __m128i *)(rk + 16 * r));
    int m = 0;
    uint64_t added = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n) {
            const uint8_t *r = recs + i * stride;
            const uint64_t h = part_hash(r + off, pk);
            const size_t part = (size_t)(h >> (64 - bits));
            if (ids)
                ids[i] = (uint16_t)(h >> 48);
            if (skipped(r, skip_flags))
                continue;
            /* the part's sum and count fetched while the AES rounds run (2^16 parts are 1.5 MiB:
             * beyond L1, and shared in L2 with the records streaming through) */
            __builtin_prefetch(acc + 2 * part, 1);
            __builtin_prefetch(count + part, 1);
            pt[m] = part;
            at[m++] = r + off;
            if (m < BATCH)
                continue;
        }
        __m128i b[BATCH];
        if (m == BATCH) {
            __m128i b0 = _mm_setzero_si128(), b1 = b0, b2 = b0, b3 = b0, b4 = b0, b5 = b0, b6 = b0, b7 = b0;
            for (size_t kk = 0; kk < dsize; kk += 16) {
                LOAD8(kk);
                R8(_mm_xor_si128, k[0]);
                for (int rr = 1; rr < 10; rr++)
                    R8(_mm_aesenc_si128, k[rr]);
                R8(_mm_aesenclast_si128, k[10]);
            }
            b[0] = b0, b[1] = b1, b[2] = b2, b[3] = b3, b[4] = b4, b[5] = b5, b[6] = b6, b[7] = b7;
        } else { /* the last few, one at a time */
            for (int j = 0; j < m; j++) {
                b[j] = _mm_setzero_si128();
                for (size_t kk = 0; kk < dsize; kk += 16)
                    b[j] = enc1(k, _mm_xor_si128(b[j], _mm_loadu_si128((const __m128i *)(at[j] + kk))));
            }
        }
        for (int j = 0; j < m; j++) {
            uint64_t v[2] = {(uint64_t)_mm_cvtsi128_si64(b[j]), (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(b[j], b[j]))};
            add_mod_p(acc + 2 * pt[j], v);
            count[pt[j]]++;
        }
        added += (uint64_t)m;
        m = 0;
    }
    return added;
}
#endif

#if LT_X86_PATHS
/* F of every record's digest, 16 bytes each into out (window.c's element map: the same PRF and
 * the same eight-in-flight AES-NI rounds as the sum above). */
TGT static void prf_aesni(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride,
                          size_t off, size_t dsize, uint8_t *out) {
    __m128i k[11];
    const uint8_t *at[BATCH];
    for (int r = 0; r < 11; r++)
        k[r] = _mm_loadu_si128((const __m128i *)(rk + 16 * r));
    size_t i = 0;
    for (; i + BATCH <= n; i += BATCH) {
        for (int j = 0; j < BATCH; j++)
            at[j] = recs + (i + (size_t)j) * stride + off;
        __m128i b0 = _mm_setzero_si128(), b1 = b0, b2 = b0, b3 = b0;
        __m128i b4 = b0, b5 = b0, b6 = b0, b7 = b0;
        for (size_t kk = 0; kk < dsize; kk += 16) {
            LOAD8(kk);
            R8(_mm_xor_si128, k[0]);
            for (int rr = 1; rr < 10; rr++)
                R8(_mm_aesenc_si128, k[rr]);
            R8(_mm_aesenclast_si128, k[10]);
        }
        __m128i *o = (__m128i *)(out + 16 * i);
        _mm_storeu_si128(o, b0), _mm_storeu_si128(o + 1, b1), _mm_storeu_si128(o + 2, b2);
        _mm_storeu_si128(o + 3, b3), _mm_storeu_si128(o + 4, b4), _mm_storeu_si128(o + 5, b5);
        _mm_storeu_si128(o + 6, b6), _mm_storeu_si128(o + 7, b7);
    }
    for (; i < n; i++) {
        const uint8_t *d = recs + i * stride + off;
        __m128i b = _mm_setzero_si128();
        for (size_t kk = 0; kk < dsize; kk += 16)
            b = enc1(k, _mm_xor_si128(b, _mm_loadu_si128((const __m128i *)(d + kk))));
        _mm_storeu_si128((__m128i *)(out + 16 * i), b);
    }
}
#endif

void lt_mset_prf(const uint8_t rk[176], const uint8_t *recs, size_t n, size_t stride, size_t off,
                 size_t dsize, int aesni, uint8_t *out) {
#if LT_X86_PATHS
    if (aesni) {
        prf_aesni(rk, recs, n, stride, off, dsize, out);
        return;
    }
#endif
    (void)aesni;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *d = recs + i * stride + off;
        uint8_t *b = out + 16 * i;
        lt_aes128_encrypt_portable(rk, d, b);
        for (size_t k = 16; k < dsize; k += 16) {
            for (int j = 0; j < 16; j++)
                b[j] ^= d[k + j];
            lt_aes128_encrypt_portable(rk, b, b);
        }
    }
}

int lt_mset_accelerated(void) {
#if LT_X86_PATHS
    return lt_cpu_has_aesni_pclmul();
#else
    return 0;
#endif
}

int lt_mset_add(const uint8_t key[16], const uint8_t *records, size_t n, size_t stride, size_t digest_offset,
                size_t digest_size, uint16_t skip_flags, int portable, uint64_t acc[2], uint64_t *count) {
    if (!key || !acc || !count || (n && !records) || digest_size == 0 || digest_size % 16 ||
        digest_offset < LT_RECORD_FIXED || digest_offset + digest_size > stride || n > SIZE_MAX / stride)
        return LT_ERR_ARG;
    if (acc[1] > P_HI || (acc[1] == P_HI && acc[0] == P_LO))
        return LT_ERR_ARG;   /* not a value mod p */
    uint8_t rk[176];
    lt_aes128_expand(key, rk);
    sum192 s = {0, 0, 0};
#if LT_X86_PATHS
    if (!portable && lt_cpu_has_aesni_pclmul())
        sum_aesni(rk, records, n, stride, digest_offset, digest_size, skip_flags, &s, count);
    else
#endif
        sum_portable(rk, records, n, stride, digest_offset, digest_size, skip_flags, &s, count);
    (void)portable;
    reduce_into(acc, &s);
    memset(rk, 0, sizeof rk);
    return LT_OK;
}

int lt_mset_add_parts(const uint8_t key[16], const uint64_t part_key[2], unsigned part_bits, const uint8_t *records,
                      size_t n, size_t stride, size_t digest_offset, size_t digest_size, uint16_t skip_flags,
                      int portable, uint64_t *acc, uint64_t *count) {
    if (part_bits == 0)
        return lt_mset_add(key, records, n, stride, digest_offset, digest_size, skip_flags, portable, acc, count);
    return lt_mset_add_parts_ids(key, part_key, part_bits, records, n, stride, digest_offset, digest_size, skip_flags,
                                 portable, acc, count, NULL, NULL);
}

int lt_mset_add_parts_ids(const uint8_t key[16], const uint64_t part_key[2], unsigned part_bits,
                          const uint8_t *records, size_t n, size_t stride, size_t digest_offset, size_t digest_size,
                          uint16_t skip_flags, int portable, uint64_t *acc, uint64_t *count, uint16_t *ids,
                          uint64_t *added) {
    if (!key || !part_key || !acc || !count || (n && !records) || digest_size == 0 || digest_size % 16 ||
        digest_offset < LT_RECORD_FIXED || digest_offset + digest_size > stride || n > SIZE_MAX / stride ||
        part_bits == 0 || part_bits > LT_MSET_MAX_PART_BITS || (ids && part_bits > 16))
        return LT_ERR_ARG;
    uint8_t rk[176];
    uint64_t k;
    lt_aes128_expand(key, rk);
#if LT_X86_PATHS
    if (!portable && lt_cpu_has_aesni_pclmul())
        k = parts_aesni(rk, records, n, stride, digest_offset, digest_size, skip_flags, part_key, part_bits, acc, count,
                    ids);
    else
#endif
        k = parts_portable(rk, records, n, stride, digest_offset, digest_size, skip_flags, part_key, part_bits, acc,
                           count, ids);
    (void)portable;
    memset(rk, 0, sizeof rk);
    if (added)
        *added += k;
    return LT_OK;
}

int lt_mset_parts_where(const uint16_t *ids, size_t n, unsigned shift, const uint8_t *wanted, size_t n_wanted,
                        uint64_t *out, size_t cap, size_t *found) {
    if ((n && !ids) || !wanted || !found || (cap && !out) || shift > 15)
        return LT_ERR_ARG;
    size_t k = 0;
    if (n_wanted >= ((size_t)0x10000 >> shift)) { /* every part has an entry: no bound to check */
        for (size_t i = 0; i < n; i++) { /* without a branch on the (rarely wanted) part */
            if (k < cap)
                out[k] = i;
            k += wanted[ids[i] >> shift] != 0;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            const size_t id = (size_t)(ids[i] >> shift);
            if (id < n_wanted && wanted[id]) {
                if (k < cap)
                    out[k] = i;
                k++;
            }
        }
    }
    *found = k;
    return LT_OK;
}
