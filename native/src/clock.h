/* The clocks the native code reads: one definition for the engine's stage profile, the isolation
 * benchmark, the live sources (AF_PACKET, AF_XDP, DPDK) and replay. Internal: not part of the C API. */
#ifndef LT_CLOCK_H
#define LT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: intervals, pacing and stall timeouts (never steps back). */
static inline int64_t lt_mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* CLOCK_REALTIME in ns: wall-clock frame timestamps where the kernel or NIC gives none. */
static inline int64_t lt_real_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

#endif
