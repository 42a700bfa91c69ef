/* AF_XDP frame source (source_xdp.c), built as the module ledgertool._source_xdp when pkg-config
 * finds libxdp and libbpf (source_bypass.h). cffi reads the CDEF block only. */
#ifndef LT_SOURCE_XDP_H
#define LT_SOURCE_XDP_H

#include <stddef.h>
#include <stdint.h>

/* CDEF BEGIN */

#define LT_XDP_MODE_AUTO 0      /* zero-copy where the driver supports it, else copy */
#define LT_XDP_MODE_ZEROCOPY 1  /* zero-copy or fail */
#define LT_XDP_MODE_COPY 2      /* copy mode */
#define LT_XDP_ATTACH_AUTO 0    /* driver (native) XDP, else generic (skb) XDP */
#define LT_XDP_ATTACH_NATIVE 1
#define LT_XDP_ATTACH_SKB 2

typedef struct {
    const char *ifname;
    uint32_t queue;        /* RX queue the socket binds to */
    uint32_t umem_kb;      /* UMEM size in KiB (0: 16384); frames = umem / frame_size, rounded down to a power of two */
    uint32_t frame_size;   /* UMEM frame size, 2048 or 4096 (0: 4096): the largest frame that fits */
    int mode;              /* LT_XDP_MODE_* */
    int attach;            /* LT_XDP_ATTACH_* */
    uint32_t poll_ms;      /* longest wait in next() before it returns 0 frames (0: 100) */
    int pin_cpu;           /* >= 0: pin the calling thread to this CPU; -1: no pinning */
} lt_xdp_config;

/* Counters of one socket (cumulative since open). */
typedef struct {
    uint64_t xdp_packets;              /* frames our XDP program redirected to this socket (BPF counter) */
    uint64_t rx_dropped;               /* XDP_STATISTICS: no UMEM frame (fill ring empty, copy mode) or frame too big */
    uint64_t rx_ring_full;             /* XDP_STATISTICS: the RX ring had no room */
    uint64_t rx_fill_ring_empty_descs; /* XDP_STATISTICS: times the fill ring was found empty (not frames) */
    uint64_t rx_invalid_descs;         /* XDP_STATISTICS */
    uint64_t frames;                   /* frames handed out (GAP pseudo-frames not counted) */
    uint64_t gaps;                     /* GAP pseudo-frames handed out */
    uint64_t drops_declared;           /* their counts: rx_dropped + rx_ring_full once stopped */
    uint64_t batches;                  /* non-empty RX ring peeks */
    uint64_t wakeups;                  /* fill-ring need_wakeup kicks (recvfrom) */
    uint32_t queue;
    uint32_t umem_frames;
    uint32_t frame_size;
    uint32_t ring_size;                /* RX and fill ring entries */
    int zero_copy;                     /* 1: the socket is bound in zero-copy mode, 0: copy mode */
    int native;                        /* 1: driver (native) XDP, 0: generic (skb) XDP */
} lt_xdp_stats;

uint32_t lt_xdp_layout(void);

/* RX queues of the interface (/sys/class/net/IF/queues/rx-*), or -errno. */
int lt_xdp_rx_queues(const char *ifname);

/* Open one XSK socket on cfg->ifname queue cfg->queue: UMEM with fill and completion rings, an
 * RX ring, and (once per interface and process, shared by the sockets of every queue) our XDP
 * program attached through a BPF link, which redirects each queue's frames to its socket and
 * counts them. *src and *ops are for lt_reader_open_source() (source_bypass.h); the frames
 * next() hands out point into the UMEM and go back to the fill ring on the following call.
 * LT_OK, LT_ERR_ARG (no such interface, queue out of range, bad sizes: the message says which),
 * LT_ERR_IO (socket, UMEM, program or bind failed: the call and errno) or LT_ERR_NOMEM. */
int lt_xdp_open(const lt_xdp_config *cfg, void **src, const void **ops, char *err, size_t errlen);

/* Stop (thread-safe): the socket leaves the redirect map at once; with drain, frames already in
 * the RX ring are still handed out (waiting at most poll_ms for frames in flight), then the last
 * drops as a GAP frame, then LT_EOF. */
int lt_xdp_request_stop(void *src, int drain);
int lt_xdp_get_stats(void *src, lt_xdp_stats *out);
/* Free a source that was opened but never wrapped in a reader. */
void lt_xdp_discard(void *src);

/* CDEF END */

#endif
