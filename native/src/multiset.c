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

/* The argument checks both pairings share; on success both masks are cleared (nothing paired). */
static int masks_start(const uint8_t *ledger, size_t n_ledger, size_t ledger_stride, const uint8_t *capture,
                       size_t n_capture, size_t capture_stride, size_t digest_offset, size_t digest_size,
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
    return LT_OK;
}

int lt_once_each(const uint8_t *ledger, size_t n_ledger, size_t ledger_stride,
                 const uint8_t *capture, size_t n_capture, size_t capture_stride,
                 size_t digest_offset, size_t digest_size, uint64_t seed,
                 uint8_t *lmask, uint8_t *cmask) {
    int st = masks_start(ledger, n_ledger, ledger_stride, capture, n_capture, capture_stride, digest_offset,
                         digest_size, lmask, cmask);
    if (st != LT_OK || !n_ledger || !n_capture)
        return st;
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

/* ---- lt_pair_in_order: the ordered fast path ----
 *
 * recompute's exact pairing (pairing.pair_tables; docs/cli.md, "Which copy is named when bytes
 * repeat") pairs a digest's ledger record and capture frame of the same timestamp first (k-th
 * with k-th among those of one time: the ledger's by (link, seq), the capture's by index), then
 * numbers the occurrences left on each side in time order - the ledger's by (ts_ns, link, seq),
 * the capture's by (ts_ns, index) - and pairs the k-th left on one side with the k-th left on the
 * other. This walk knows only the second, rank rule: the pairs it returns are the exact
 * pairing's for a digest none of whose occurrences shares its time with one on the other side
 * (then no pair is made at its own time), and for a digest whose walked pairs each join two
 * equal times. The caller (multiset._keep_same_time) keeps only those and gives the other
 * digests' pairs back to the exact pairing. For the rank rule: claim: removing from both sides
 * any set of pairs (i, j) with equal digests whose occurrence numbers are equal (rank_L(i) ==
 * rank_C(j)) leaves a remainder whose rank pairing classifies every remaining record as the
 * whole one did. Proof: for a digest with l ledger and c capture occurrences, the removed ranks
 * form one set K on both sides, K within 1..min(l, c) (each removed pair is a k-th/k-th pair and
 * so matched). Renumbered, the remainder's ledger ranks 1..min \ K and capture ranks 1..min \ K
 * pair with each other in the same order as before, and the ranks above min(l, c), one side
 * only, stay unpaired: the same matched / ledger-only / capture-only records.
 *
 * The walk below finds such pairs at memcmp speed. When each side's array order is its total
 * order (checked: keys strictly increasing, else nothing is paired), a record's rank is the
 * number of earlier records in its array with its digest. Both arrays are walked once in step;
 * every record passed over is either paired with the record at the other side's cursor or put
 * into the rest, and the rest's first 8 digest bytes go into a small set `seen`. A pair is only
 * taken when its digest's first 8 bytes are not in `seen`: then no earlier record of that digest
 * is in the rest on either side, the earlier ones were all paired one to one, so both prefixes
 * hold the same number of them and the ranks are equal. How the walk resynchronises after a
 * mismatch (a short look-ahead for the drop or insert) only decides what goes to the rest, never
 * whether a pair is sound; the rest goes to lt_once_each and the exact pairing. */

#define LOOKAHEAD 16       /* records searched ahead on each side for a resynchronisation */
#define REST_FLOOR 4096    /* rest records always allowed before the walk gives up */

typedef struct {
    uint64_t *keys; /* mix(first 8 bytes) + 1, 0: empty */
    size_t cap, n;
    int zero;       /* the key that is 0 after + 1 */
} seen_set;

static int seen_add(seen_set *s, uint64_t h) {
    if (h == UINT64_MAX) {
        s->zero = 1;
        return 0;
    }
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        uint64_t *k = calloc(cap, sizeof(uint64_t));
        if (!k)
            return -1;
        for (size_t i = 0; i < s->cap; i++)
            for (size_t p = s->keys[i] & (cap - 1); s->keys[i]; p = (p + 1) & (cap - 1))
                if (!k[p]) {
                    k[p] = s->keys[i];
                    break;
                }
        free(s->keys);
        s->keys = k;
        s->cap = cap;
    }
    for (size_t p = (h + 1) & (s->cap - 1);; p = (p + 1) & (s->cap - 1)) {
        if (!s->keys[p]) {
            s->keys[p] = h + 1;
            s->n++;
            return 0;
        }
        if (s->keys[p] == h + 1)
            return 0;
    }
}

static int seen_has(const seen_set *s, uint64_t h) {
    if (h == UINT64_MAX)
        return s->zero;
    if (!s->n)
        return 0;
    for (size_t p = (h + 1) & (s->cap - 1);; p = (p + 1) & (s->cap - 1)) {
        if (!s->keys[p])
            return 0;
        if (s->keys[p] == h + 1)
            return 1;
    }
}

static inline int same_digest(const uint8_t *a, const uint8_t *b, size_t size) {
    uint64_t x[2], y[2];
    switch (size) { /* the usual sizes without a call */
    case 16:
        memcpy(x, a, 16);
        memcpy(y, b, 16);
        return x[0] == y[0] && x[1] == y[1];
    case 32:
        memcpy(x, a, 16);
        memcpy(y, b, 16);
        if (x[0] != y[0] || x[1] != y[1])
            return 0;
        memcpy(x, a + 16, 16);
        memcpy(y, b + 16, 16);
        return x[0] == y[0] && x[1] == y[1];
    default:
        return !memcmp(a, b, size);
    }
}

static inline uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Record a comes before record b in its side's pairing order (ledger: ts_ns signed, then the
 * link code, then seq; capture: ts_ns, then index = seq; la = lb for the capture). */
static inline int before(const uint8_t *a, const uint8_t *b, uint32_t la, uint32_t lb) {
    int64_t ta = (int64_t)rd64(a + 8), tb = (int64_t)rd64(b + 8);
    if (ta != tb)
        return ta < tb;
    if (la != lb)
        return la < lb;
    return rd64(a) < rd64(b);
}

/* Records from..n-1 of a side in its pairing order (keys strictly increasing). */
static int in_order(const uint8_t *r, size_t from, size_t n, size_t stride, const uint32_t *link) {
    for (size_t i = from + 1; i < n; i++)
        if (!before(r + (i - 1) * stride, r + i * stride, link ? link[i - 1] : 0, link ? link[i] : 0))
            return 0;
    return 1;
}

int lt_pair_in_order(const uint8_t *ledger, size_t n_ledger, size_t ledger_stride, const uint32_t *ledger_link,
                     const uint8_t *capture, size_t n_capture, size_t capture_stride,
                     size_t digest_offset, size_t digest_size, uint8_t *lmask, uint8_t *cmask, size_t *paired) {
    if (!paired || digest_offset < LT_RECORD_FIXED)
        return LT_ERR_ARG;
    int st0 = masks_start(ledger, n_ledger, ledger_stride, capture, n_capture, capture_stride, digest_offset,
                          digest_size, lmask, cmask);
    if (st0 != LT_OK)
        return st0;
    *paired = 0;
    const uint8_t *ld = ledger + digest_offset, *cd = capture + digest_offset;
    seen_set seen = {0};
    size_t i = 0, j = 0, rest = 0, n = 0;
    size_t li = 0, cj = 0; /* records up to li / cj checked to be in order (one pass over the records) */
    int rc = LT_OK, ordered = 1;
#define TO_REST(d)                                                 \
    do {                                                           \
        if (seen_add(&seen, hash_of((d), digest_size, 0)) < 0) {   \
            rc = LT_ERR_NOMEM;                                     \
            goto out;                                              \
        }                                                          \
        rest++;                                                    \
    } while (0)
    while (i < n_ledger && j < n_capture) {
        for (; li < i; li++)
            if (!before(ledger + li * ledger_stride, ledger + (li + 1) * ledger_stride,
                        ledger_link ? ledger_link[li] : 0, ledger_link ? ledger_link[li + 1] : 0))
                goto unordered;
        for (; cj < j; cj++)
            if (!before(capture + cj * capture_stride, capture + (cj + 1) * capture_stride, 0, 0))
                goto unordered;
        const uint8_t *a = ld + i * ledger_stride, *b = cd + j * capture_stride;
        if (same_digest(a, b, digest_size)) {
            if (seen.n || seen.zero) {
                if (seen_has(&seen, hash_of(a, digest_size, 0))) { /* an earlier one is in the rest */
                    TO_REST(a); /* and b, the same digest */
                    rest++;
                    i++, j++;
                    continue;
                }
            }
            lmask[i++] = 1;
            cmask[j++] = 1;
            n++;
            continue;
        }
        if (rest > REST_FLOOR + (i + j) / 16)
            break; /* mostly different: the general pairing does the rest at its own speed */
        /* a drop (ledger records missing from the capture) or an insert: the nearest resync */
        size_t skip_l = 0, skip_c = 0;
        for (size_t k = 1; k <= LOOKAHEAD; k++) {
            if (j + k < n_capture && same_digest(a, b + k * capture_stride, digest_size)) {
                skip_c = k;
                break;
            }
            if (i + k < n_ledger && same_digest(a + k * ledger_stride, b, digest_size)) {
                skip_l = k;
                break;
            }
        }
        if (!skip_l && !skip_c)
            skip_l = skip_c = 1;
        for (; skip_l; skip_l--, i++)
            TO_REST(ld + i * ledger_stride);
        for (; skip_c; skip_c--, j++)
            TO_REST(cd + j * capture_stride);
    }
#undef TO_REST
    /* ranks are array positions only when each whole side is in order: else nothing is paired */
    if (in_order(ledger, li, n_ledger, ledger_stride, ledger_link) && in_order(capture, cj, n_capture, capture_stride, NULL)) {
        *paired = n;
        goto out;
    }
unordered:
    ordered = 0;
out:
    free(seen.keys);
    if (rc != LT_OK || !ordered) {
        if (n_ledger)
            memset(lmask, 0, n_ledger);
        if (n_capture)
            memset(cmask, 0, n_capture);
    }
    return rc;
}
