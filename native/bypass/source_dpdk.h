/* DPDK frame source (source_dpdk.c), built as the module ledgertool._source_dpdk when pkg-config
 * finds libdpdk (source_bypass.h). cffi reads the CDEF block only. */
#ifndef LT_SOURCE_DPDK_H
#define LT_SOURCE_DPDK_H

#include <stddef.h>
#include <stdint.h>

/* CDEF BEGIN */

typedef struct {
    const char *port;      /* port id ("0") or ethdev name ("net_pcap0") */
    uint32_t queues;       /* RX queues to set up, one reader each (RSS spreads flows when > 1 and the port has it) */
    uint32_t mbufs;        /* mbufs in the port's pool (data room 2048 bytes each) */
    uint32_t rx_desc;      /* RX descriptors per queue (0: 1024, adjusted to the device's limits) */
    int promisc;           /* 1: promiscuous mode */
} lt_dpdk_port_config;

/* Counters of one RX queue (cumulative since open). */
typedef struct {
    uint64_t rx_packets;       /* frames the PMD delivered on this queue (rte_eth_stats q_ipackets; ipackets for one queue) */
    uint64_t imissed;          /* port-wide rte_eth_stats, on the reader of queue 0 only (0 elsewhere) */
    uint64_t rx_nombuf;
    uint64_t ierrors;
    uint64_t frames;           /* frames handed out (GAP pseudo-frames not counted) */
    uint64_t gaps;             /* GAP pseudo-frames handed out */
    uint64_t drops_declared;   /* their counts: imissed + rx_nombuf + ierrors once stopped (queue 0) */
    uint64_t bursts;           /* non-empty rte_eth_rx_burst calls */
    uint64_t multi_segment;    /* frames in chained mbufs: only the first segment is hashed (flag TRUNCATED) */
    uint64_t pmd_timestamps;   /* frames that carried the PMD's timestamp (net_pcap: the capture's own time) */
    uint32_t port;
    uint32_t queue;
    uint32_t queues;
    uint32_t mbufs;
    uint32_t rx_desc;
    int rss;                   /* 1: the port spreads flows over the queues by RSS */
    int lcore;                 /* DPDK lcore id of the thread reading this queue (-1: none) */
    char driver[32];           /* the port's driver name, e.g. net_pcap, net_af_packet, mlx5_pci */
} lt_dpdk_stats;

uint32_t lt_dpdk_layout(void);

/* Initialise DPDK's EAL once per process with argv (argv[0] is the program name). A second call
 * with the same arguments returns LT_OK; other arguments LT_ERR_ARG (EAL cannot be initialised
 * twice). The calling thread's CPU affinity is restored afterwards (EAL pins it to the main lcore).
 * EAL's start-up output (usage text, log) is captured: copied to stderr with keep_log, else
 * dropped; on failure the message quotes the lines that report a problem. Later DPDK logging goes
 * to stderr. LT_OK, LT_ERR_ARG (already initialised with other arguments) or LT_ERR_IO. */
int lt_dpdk_eal_init(int argc, const char *const *argv, int keep_log, char *err, size_t errlen);

/* Configure and start a port with cfg->queues RX queues (no TX queue) and one mbuf pool. The
 * returned handle is released with lt_dpdk_port_release (readers hold their own references; the
 * port is stopped and closed when the last one goes). LT_OK, LT_ERR_ARG (no such port, too many
 * queues: the message lists what exists) or LT_ERR_IO / LT_ERR_NOMEM (device or pool set-up). */
int lt_dpdk_port_open(const lt_dpdk_port_config *cfg, void **port, char *err, size_t errlen);
void lt_dpdk_port_release(void *port);

/* One reader per RX queue of an open port. *src and *ops are for lt_reader_open_source(); frames
 * point into mbufs (zero copy), which are freed on the following next() call. */
int lt_dpdk_open(void *port, uint32_t queue, uint32_t poll_ms, int pin_cpu, void **src, const void **ops,
                 char *err, size_t errlen);
/* Stop (thread-safe): with drain, bursts continue until the queue stays empty for poll_ms; then
 * the final drops as a GAP frame (queue 0), then LT_EOF. */
int lt_dpdk_request_stop(void *src, int drain);
int lt_dpdk_get_stats(void *src, lt_dpdk_stats *out);
void lt_dpdk_discard(void *src);

/* CDEF END */

#endif
