/* Multiset pairing: which records' digests occur exactly once on each side (lt_once_each).
 *
 * In a capture that agrees with its ledger almost every digest occurs once in each; those pairs
 * are matched whatever the pairing rule, and only the rest needs recompute's exact pairing
 * (ledgertool/reconcile/multiset.py). Digests are grouped by their first 8 bytes through a seeded
 * bijective mix h: both sides' (h, index) entries are first scattered into buckets by h's top bits
 * (sequential passes), then each bucket is counted in a hash table small enough for the caches.
 * A direct table over all records was about twice as slow here: nearly every probe missed the
 * caches and the TLB. A group with exactly one entry on each side is a pair when the two full
 * digests are equal (compared last, in ledger order); every other group (repeats, one-sided,
 * 64-bit prefix collisions) is left to the exact pairing. */
#include "ledgertool.h"

#include <stdlib.h>
#include <string.h>

#define MANY (UINT64_C(1) << 63) /* a second entry was seen on that side */
#define BUCKET_TARGET 2048       /* ledger entries per bucket aimed at: its table stays in L2 */
#define MAX_BUCKET_BITS 12       /* at most 4096 scatter streams */

typedef struct {
    uint64_t h;   /* mix(the digest's first 8 bytes ^ seed) */
    uint64_t idx; /* record index */
} ms_entry;

typedef struct {
    uint64_t h;
    uint64_t li; /* ledger record index + 1 (0: empty slot), | MANY */
    uint64_t ci; /* capture record index + 1 (0: none seen), | MANY */
} ms_slot;

/* murmur3's 64-bit finaliser: a bijection, so equal h means equal first 8 bytes */
static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static inline uint64_t hash_of(const uint8_t *d, size_t size, uint64_t seed) {
    uint64_t p = 0;
    memcpy(&p, d, size < 8 ? size : 8);
    return mix(p ^ seed);
}

/* Entries of n records (digests at d, stride apart) in bucket order: start[b] .. start[b + 1]
 * (start has nb + 1 elements). `hs` (n words) keeps each h between the two passes, so the
 * records are read once. */
static void scatter(const uint8_t *d, size_t n, size_t stride, size_t digest_size, uint64_t seed, unsigned bits,
                    ms_entry *out, size_t *start, size_t *fill, uint64_t *hs) {
    size_t nb = (size_t)1 << bits;
    memset(start, 0, (nb + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        hs[i] = hash_of(d + i * stride, digest_size, seed);
        start[(bits ? hs[i] >> (64 - bits) : 0) + 1]++;
    }
    for (size_t b = 0; b < nb; b++)
        start[b + 1] += start[b];
    memcpy(fill, start, nb * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        out[fill[bits ? hs[i] >> (64 - bits) : 0]++] = (ms_entry){hs[i], i};
}

/* Count one bucket's groups in `tab` (cap slots, a power of two, zeroed on return); a group
 * with one entry on each side is a candidate: lmask[li] = 1, cand[li] = ci. */
static void pair_bucket(const ms_entry *le, size_t nl, const ms_entry *ce, size_t nc, ms_slot *tab, size_t cap,
                        uint8_t *lmask, uint64_t *cand) {
    size_t mask = cap - 1;
    for (size_t i = 0; i < nl; i++) {
        uint64_t h = le[i].h;
        for (size_t s = h & mask;; s = (s + 1) & mask) {
            if (!tab[s].li) {
                tab[s].h = h;
                tab[s].li = le[i].idx + 1;
                break;
            }
            if (tab[s].h == h) {
                tab[s].li |= MANY;
                break;
            }
        }
    }
    for (size_t j = 0; j < nc; j++) {
        uint64_t h = ce[j].h;
        for (size_t s = h & mask;; s = (s + 1) & mask) {
            ms_slot *t = &tab[s];
            if (!t->li)
                break; /* not in the ledger: capture-only, decided by the exact pairing */
            if (t->h == h) {
                t->ci = t->ci ? (t->ci | MANY) : ce[j].idx + 1;
                break;
            }
        }
    }
    for (size_t s = 0; s < cap; s++) {
        ms_slot *t = &tab[s];
        if (t->li && !(t->li & MANY) && t->ci && !(t->ci & MANY)) {
            lmask[t->li - 1] = 1;
            cand[t->li - 1] = t->ci - 1;
        }
        *t = (ms_slot){0, 0, 0};
    }
}

int lt_once_each(const uint8_t *ledger, size_t n_ledger, size_t ledger_stride,
                 const uint8_t *capture, size_t n_capture, size_t capture_stride,
                 size_t digest_offset, size_t digest_size, uint64_t seed,
                 uint8_t *lmask, uint8_t *cmask) {
    if (digest_size == 0 || digest_offset > SIZE_MAX - digest_size)
        return LT_ERR_ARG;
    size_t end = digest_offset + digest_size;
    if ((n_ledger && (!ledger || !lmask || ledger_stride < end)) ||
        (n_capture && (!capture || !cmask || capture_stride < end)))
        return LT_ERR_ARG;
    if (n_ledger)
        memset(lmask, 0, n_ledger);
    if (n_capture)
        memset(cmask, 0, n_capture);
    if (!n_ledger || !n_capture)
        return LT_OK;
    if (n_ledger >= MANY - 1 || n_capture >= MANY - 1 || n_ledger > SIZE_MAX / sizeof(ms_entry) - n_capture)
        return LT_ERR_ARG;
    unsigned bits = 0;
    while (bits < MAX_BUCKET_BITS && (n_ledger >> bits) > BUCKET_TARGET)
        bits++;
    size_t nb = (size_t)1 << bits;
    ms_entry *ent = malloc((n_ledger + n_capture) * sizeof(ms_entry));
    uint64_t *hs = malloc((n_ledger > n_capture ? n_ledger : n_capture) * sizeof(uint64_t)); /* then cand */
    size_t *lstart = malloc((nb + 1) * sizeof(size_t)), *cstart = malloc((nb + 1) * sizeof(size_t));
    size_t *fill = malloc(nb * sizeof(size_t));
    ms_slot *tab = NULL;
    size_t cap = 16;
    int rc = LT_ERR_NOMEM;
    if (!ent || !hs || !lstart || !cstart || !fill)
        goto out;
    const uint8_t *ld = ledger + digest_offset, *cd = capture + digest_offset;
    ms_entry *le = ent, *ce = ent + n_ledger;
    scatter(ld, n_ledger, ledger_stride, digest_size, seed, bits, le, lstart, fill, hs);
    scatter(cd, n_capture, capture_stride, digest_size, seed, bits, ce, cstart, fill, hs);
    size_t most = 0;
    for (size_t b = 0; b < nb; b++)
        if (lstart[b + 1] - lstart[b] > most)
            most = lstart[b + 1] - lstart[b];
    while (cap < most + most / 2) /* load factor at most 2/3 in every bucket */
        cap <<= 1;
    tab = calloc(cap, sizeof(ms_slot));
    if (!tab)
        goto out;
    for (size_t b = 0; b < nb; b++) {
        size_t nl = lstart[b + 1] - lstart[b], c = cap;
        while (c > 16 && c / 2 >= nl + nl / 2) /* a small bucket's table: fewer slots to scan */
            c /= 2;
        pair_bucket(le + lstart[b], nl, ce + cstart[b], cstart[b + 1] - cstart[b], tab, c, lmask, hs);
    }
    /* the full digests of the candidates, in ledger order: sequential on both sides when the
     * capture is in the ledger's order, as it nearly always is */
    for (size_t i = 0; i < n_ledger; i++) {
        if (!lmask[i])
            continue;
        if (!memcmp(ld + i * ledger_stride, cd + hs[i] * capture_stride, digest_size))
            cmask[hs[i]] = 1;
        else
            lmask[i] = 0;
    }
    rc = LT_OK;
out:
    free(tab);
    free(fill);
    free(cstart);
    free(lstart);
    free(hs);
    free(ent);
    return rc;
}
