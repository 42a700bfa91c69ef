/* Frames per second of a run of records (lt_second_runs): recompute's per-second tally of a
 * segment without a numpy pass per column (ledgertool/reconcile/multiset.py, per_second). */
#include "ledgertool.h"
#include "lt_internal.h"

#define NS 1000000000LL

static inline int64_t floor_sec(int64_t ts) {   /* floor(ts / 10^9), as Python's // */
    int64_t q = ts / NS;
    return (ts % NS < 0) ? q - 1 : q;
}

int lt_second_runs(const uint8_t *records, size_t n, size_t stride, uint16_t skip_flags, int64_t *secs,
                   uint64_t *counts, size_t cap, size_t *nruns) {
    if (!nruns || (n && !records) || stride < LT_RECORD_FIXED || (cap && (!secs || !counts)))
        return LT_ERR_ARG;
    size_t runs = 0;
    int64_t lo = 0, hi = 0, sec = 0; /* the current run's second covers [lo, hi] ns */
    uint64_t count = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = records + i * stride;
        uint16_t flags = (uint16_t)(r[24] | (r[25] << 8));
        if (flags & skip_flags)
            continue;
        int64_t ts = (int64_t)lt_load_le64(r + 8);
        if (count && ts >= lo && ts <= hi) { /* the usual case: no division */
            count++;
            continue;
        }
        if (count) {
            if (runs < cap)
                secs[runs] = sec, counts[runs] = count;
            runs++;
        }
        sec = floor_sec(ts);
        __int128 first = (__int128)sec * NS, last = first + NS - 1; /* (clamped: no overflow at the ends) */
        lo = first < INT64_MIN ? INT64_MIN : (int64_t)first;
        hi = last > INT64_MAX ? INT64_MAX : (int64_t)last;
        count = 1;
    }
    if (count) {
        if (runs < cap)
            secs[runs] = sec, counts[runs] = count;
        runs++;
    }
    *nruns = runs;
    return LT_OK;
}
