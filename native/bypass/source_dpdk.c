/*
 * Live capture through DPDK: rte_eth_rx_burst on one RX queue per reader, the mbufs' data handed
 * to the engine as frame descriptors (no copy), wrapped in an lt_reader through lt_source_ops
 * (source_bypass.h, docs/capture.md "Kernel bypass").
 *
 * ---------------------------------------------------------------------------------------------
 * EAL: initialised once per process (lt_dpdk_eal_init); its start-up log is captured so that a
 *   failure becomes one line naming the cause. EAL pins the calling thread to the main lcore; we
 *   restore that thread's affinity, because every thread Python starts later inherits it.
 * Port: lt_dpdk_port_open configures N RX queues (RSS over IP/TCP/UDP when N > 1 and the device
 *   hashes), no TX queue, one mbuf pool, and starts it. Readers of queues 0..N-1 share it.
 * CONTRACT of next() (as for AF_PACKET, capture_afpacket.c):
 * Zero copy: lt_frame.data = rte_pktmbuf_mtod(m), caplen = the first segment's data_len,
 *   wire_len = pkt_len (a chained mbuf is hashed over its first segment and flagged TRUNCATED by
 *   the engine). The mbufs of one call are freed (rte_pktmbuf_free_bulk) at the start of the next.
 * Poll mode: bursts are polled without system calls; after EMPTY_SPINS empty bursts in a row the
 *   thread sleeps IDLE_SLEEP_US between polls (so an idle capture does not burn its core), and
 *   next() returns LT_OK with *n == 0 when nothing arrived within poll_ms, and at least once every
 *   poll_ms under steady traffic.
 * Drops: on the reader of queue 0, the increase of rte_eth_stats imissed + rx_nombuf + ierrors
 *   (port-wide: the NIC or PMD had no descriptor, no mbuf, or received a bad frame) becomes one
 *   LT_RF_GAP pseudo-frame, read at most once per millisecond while frames flow and on every idle
 *   poll. Other queues declare none (the counters are not per queue).
 * Timestamps: net_pcap puts the capture's (or the live interface's) time in the mbuf timestamp
 *   field, in microseconds since the epoch; we use it there. Other drivers' timestamps are in
 *   device clock units, so every frame of one burst gets the CLOCK_REALTIME of the burst.
 * Stop: drain = 1 keeps polling until the queue was empty for poll_ms; drain = 0 stops at once.
 *   Then the final statistics (GAP), then LT_EOF.
 * ---------------------------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include "ledgertool.h"
#include "source_bypass.h"
#include "source_dpdk.h"
#include "clock.h"

#define DEFAULT_POLL_MS 100u
#define DEFAULT_RX_DESC 1024u
#define HOLD_MAX 2048u        /* mbufs one next() call hands out at most */
#define BURST 64u
#define EMPTY_SPINS 1024u
#define IDLE_SLEEP_US 50
#define STATS_EVERY_NS 1000000
#define POOL_CACHE 256u

/* ---- EAL ---------------------------------------------------------------------------------- */

static pthread_mutex_t eal_mu = PTHREAD_MUTEX_INITIALIZER;
static char *eal_args;  /* the arguments EAL was initialised with, joined by '\n' */
static int eal_status;  /* 0: not tried, 1: up, -1: failed (EAL cannot be retried in a process) */

uint32_t lt_dpdk_layout(void) { return LT_SOURCE_LAYOUT; }

static char *join_args(int argc, const char *const *argv) {
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *s = calloc(1, len);
    if (!s) return NULL;
    for (int i = 0; i < argc; i++) {
        strcat(s, argv[i]);
        strcat(s, "\n");
    }
    return s;
}

/* What EAL (and the drivers it probes) said was wrong, from its start-up output: the lines that
 * report a failure, joined by "; " (duplicates and the generic "FATAL" lines left out). */
static void problems(FILE *f, char *out, size_t outlen) {
    static const char *const words[] = {"fail", "couldn't", "cannot", "unable", "error", "invalid", "not compatible",
                                        "unrecognized", "missing", "no such", "not supported", "refused"};
    out[0] = 0;
    if (!f) return;
    rewind(f);
    char line[512], prev[512] = "";
    size_t used = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || strstr(line, "FATAL") || strstr(line, "Invalid 'command line' arguments") || !strcmp(line, prev))
            continue;
        int hit = 0;
        for (size_t i = 0; i < sizeof words / sizeof words[0] && !hit; i++) hit = strcasestr(line, words[i]) != NULL;
        if (!hit) continue;
        snprintf(prev, sizeof prev, "%s", line);
        int w = snprintf(out + used, outlen - used, "%s%s", used ? "; " : "", line);
        if (w < 0 || (size_t)w >= outlen - used) {
            out[outlen - 1] = 0;
            break;
        }
        used += (size_t)w;
    }
}

static char eal_problems[768]; /* from a successful start-up: e.g. a --vdev that did not probe */

int lt_dpdk_eal_init(int argc, const char *const *argv, int keep_log, char *err, size_t errlen) {
    char *joined = join_args(argc, argv);
    if (!joined) return LT_ERR_NOMEM;
    pthread_mutex_lock(&eal_mu);
    if (eal_status != 0) {
        int same = eal_args && !strcmp(eal_args, joined);
        int st = eal_status > 0 && same ? LT_OK : LT_ERR_ARG;
        if (st != LT_OK)
            lt_errf(err, errlen, "dpdk: EAL %s in this process with other arguments; it cannot be "
                    "initialised twice", eal_status > 0 ? "was already initialised" : "failed to start");
        pthread_mutex_unlock(&eal_mu);
        free(joined);
        return st;
    }
    cpu_set_t before;
    int have_aff = pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
    /* EAL prints its usage on stdout and getopt's complaints on stderr: catch both (our stdout is
     * the --json report), and its log, which would otherwise also go to syslog */
    fflush(stdout);
    fflush(stderr);
    FILE *cap = tmpfile();
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    int redirected = cap && null >= 0 && saved_out >= 0 && saved_err >= 0;
    if (redirected) {
        dup2(null, STDOUT_FILENO);
        dup2(fileno(cap), STDERR_FILENO);
        rte_openlog_stream(cap);
    }
    char **av = calloc((size_t)argc + 1, sizeof *av); /* EAL permutes its argv */
    for (int i = 0; av && i < argc; i++) av[i] = (char *)argv[i];
    int r = av ? rte_eal_init(argc, av) : -1;
    int e = av ? rte_errno : ENOMEM;
    free(av);
    if (redirected) {
        fflush(stdout);
        fflush(stderr);
        fflush(cap);
        dup2(saved_out, STDOUT_FILENO);
        dup2(saved_err, STDERR_FILENO);
    }
    rte_openlog_stream(stderr); /* from now on DPDK logs to stderr, not to syslog */
    if (saved_out >= 0) close(saved_out);
    if (saved_err >= 0) close(saved_err);
    if (null >= 0) close(null);
    if (have_aff) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
    int st = LT_OK;
    char what[768];
    problems(cap, what, sizeof what);
    if (r < 0) {
        lt_errf(err, errlen, "dpdk: EAL initialisation failed (%s)%s%s%s", rte_strerror(e), what[0] ? ": " : "", what,
                strcasestr(what, "hugepage") ? " (reserve hugepages, or add --no-huge to --eal)" : "");
        eal_status = -1;
        st = LT_ERR_IO;
    } else {
        eal_status = 1;
        snprintf(eal_problems, sizeof eal_problems, "%s", what);
        if (keep_log && cap) {
            rewind(cap);
            char buf[4096];
            size_t nr;
            while ((nr = fread(buf, 1, sizeof buf, cap)) > 0) fwrite(buf, 1, nr, stderr);
        }
    }
    if (cap) fclose(cap);
    free(eal_args);
    eal_args = joined;
    pthread_mutex_unlock(&eal_mu);
    return st;
}

/* ---- port --------------------------------------------------------------------------------- */

typedef struct {
    uint16_t id;
    uint32_t queues, rx_desc, mbufs;
    int rss;
    char driver[32];
    struct rte_mempool *pool;
    int ts_off;            /* timestamp dynfield offset, or -1 when we do not use the PMD's time */
    uint64_t ts_flag;
    int refs;
    pthread_mutex_t mu;    /* rte_eth_stats_get is not documented as thread-safe */
} dpdk_port;

static pthread_mutex_t ports_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned pool_seq;

static void list_ports(char *buf, size_t len) {
    buf[0] = 0;
    size_t used = 0;
    uint16_t pid;
    RTE_ETH_FOREACH_DEV(pid) {
        char name[RTE_ETH_NAME_MAX_LEN];
        if (rte_eth_dev_get_name_by_port(pid, name) != 0) continue;
        int w = snprintf(buf + used, len - used, "%s%u %s", used ? ", " : "", pid, name);
        if (w < 0 || (size_t)w >= len - used) break;
        used += (size_t)w;
    }
    if (!used) snprintf(buf, len, "none: give the device with --eal, e.g. -a PCI or --vdev");
}

static int resolve_port(const char *spec, uint16_t *id) {
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(spec, &end, 10);
    if (spec[0] >= '0' && spec[0] <= '9' && end && !*end && !errno && v < RTE_MAX_ETHPORTS) {
        *id = (uint16_t)v;
        return rte_eth_dev_is_valid_port(*id) ? 0 : -1;
    }
    return rte_eth_dev_get_port_by_name(spec, id) == 0 ? 0 : -1;
}

static void port_free(dpdk_port *p) {
    rte_eth_dev_stop(p->id);
    rte_eth_dev_close(p->id); /* releases the queues and the mbufs they hold */
    if (p->pool) rte_mempool_free(p->pool);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void lt_dpdk_port_release(void *port) {
    dpdk_port *p = port;
    if (!p) return;
    pthread_mutex_lock(&ports_mu);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&ports_mu);
    if (last) port_free(p);
}

int lt_dpdk_port_open(const lt_dpdk_port_config *cfg, void **out, char *err, size_t errlen) {
    *out = NULL;
    if (eal_status <= 0) {
        lt_errf(err, errlen, "dpdk: EAL is not initialised");
        return LT_ERR_ARG;
    }
    if (!cfg || !cfg->port || !cfg->port[0]) {
        lt_errf(err, errlen, "dpdk: missing port");
        return LT_ERR_ARG;
    }
    char ports[512];
    uint16_t id;
    if (resolve_port(cfg->port, &id) != 0) {
        list_ports(ports, sizeof ports);
        lt_errf(err, errlen, "dpdk:%s: no such port (ports: %s)%s%s", cfg->port, ports,
                eal_problems[0] ? "; EAL start-up: " : "", eal_problems);
        return LT_ERR_ARG;
    }
    struct rte_eth_dev_info di;
    int r = rte_eth_dev_info_get(id, &di);
    if (r != 0) {
        lt_errf(err, errlen, "dpdk:%s: rte_eth_dev_info_get: %s", cfg->port, rte_strerror(-r));
        return LT_ERR_IO;
    }
    uint32_t nq = cfg->queues ? cfg->queues : 1;
    if (nq > di.max_rx_queues) {
        lt_errf(err, errlen, "dpdk:%s: %u RX queue%s asked (--workers), port %u (%s) has at most %u", cfg->port, nq,
                nq == 1 ? "" : "s", id, di.driver_name, di.max_rx_queues);
        return LT_ERR_ARG;
    }
    dpdk_port *p = calloc(1, sizeof *p);
    if (!p) return LT_ERR_NOMEM;
    pthread_mutex_init(&p->mu, NULL);
    p->id = id;
    p->queues = nq;
    p->refs = 1;
    p->ts_off = -1;
    snprintf(p->driver, sizeof p->driver, "%s", di.driver_name ? di.driver_name : "?");

    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    uint64_t hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) & di.flow_type_rss_offloads;
    if (nq > 1 && hf) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = hf;
        p->rss = 1;
    }
    r = rte_eth_dev_configure(id, (uint16_t)nq, 0, &conf);
    if (r != 0) {
        lt_errf(err, errlen, "dpdk:%s: rte_eth_dev_configure (%u RX queues): %s", cfg->port, nq, rte_strerror(-r));
        free(p);
        return LT_ERR_IO;
    }
    uint16_t rxd = (uint16_t)(cfg->rx_desc ? (cfg->rx_desc > 32768 ? 32768 : cfg->rx_desc) : DEFAULT_RX_DESC);
    uint16_t txd = 0;
    rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
    p->rx_desc = rxd;
    /* the queues hold rx_desc mbufs each, and the readers up to HOLD_MAX more each */
    uint64_t need = (uint64_t)nq * (rxd + HOLD_MAX) + POOL_CACHE * 2;
    p->mbufs = cfg->mbufs ? cfg->mbufs : (uint32_t)need;
    if (p->mbufs < 64) p->mbufs = 64;
    char pname[RTE_MEMPOOL_NAMESIZE];
    pthread_mutex_lock(&ports_mu);
    snprintf(pname, sizeof pname, "lt_rx_%u_%u", id, pool_seq++);
    pthread_mutex_unlock(&ports_mu);
    int sock = rte_eth_dev_socket_id(id);
    p->pool = rte_pktmbuf_pool_create(pname, p->mbufs, p->mbufs >= 4 * POOL_CACHE ? POOL_CACHE : 0, 0,
                                      RTE_MBUF_DEFAULT_BUF_SIZE, sock < 0 ? (int)SOCKET_ID_ANY : sock);
    if (!p->pool) {
        int e = rte_errno;
        lt_errf(err, errlen, "dpdk:%s: mbuf pool of %u mbufs (%.1f MiB): %s (reserve hugepages, give more memory "
                "with -m in --eal, or lower --ring-mb)", cfg->port, p->mbufs,
                p->mbufs * (double)(RTE_MBUF_DEFAULT_BUF_SIZE + sizeof(struct rte_mbuf)) / 1048576.0, rte_strerror(e));
        rte_eth_dev_close(id);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return LT_ERR_NOMEM;
    }
    for (uint32_t q = 0; q < nq; q++) {
        r = rte_eth_rx_queue_setup(id, (uint16_t)q, rxd, sock < 0 ? (unsigned)SOCKET_ID_ANY : (unsigned)sock, NULL,
                                   p->pool);
        if (r < 0) {
            lt_errf(err, errlen, "dpdk:%s: rte_eth_rx_queue_setup (queue %u, %u descriptors): %s", cfg->port, q, rxd,
                    rte_strerror(-r));
            port_free(p);
            return LT_ERR_IO;
        }
    }
    r = rte_eth_dev_start(id);
    if (r < 0) {
        lt_errf(err, errlen, "dpdk:%s: rte_eth_dev_start: %s%s", cfg->port, rte_strerror(-r),
                r == -ENOMEM || r == -ENOBUFS ? " (mbuf pool too small for the RX descriptors: raise --ring-mb)" : "");
        port_free(p);
        return LT_ERR_IO;
    }
    if (cfg->promisc) rte_eth_promiscuous_enable(id); /* -ENOTSUP on some vdevs: harmless */
    if (!strcmp(p->driver, "net_pcap")) {
        int off = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, NULL);
        int bit = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, NULL);
        if (off >= 0 && bit >= 0) {
            p->ts_off = off;
            p->ts_flag = 1ULL << bit;
        }
    }
    rte_eth_stats_reset(id); /* counters of this capture only */
    *out = p;
    return LT_OK;
}

/* ---- one RX queue ------------------------------------------------------------------------- */

typedef struct {
    dpdk_port *port;
    uint16_t queue;
    uint32_t poll_ms;
    struct rte_mbuf *held[HOLD_MAX];
    uint32_t nheld;
    volatile int stop;
    int drain, done;
    int64_t stop_ns, last_return_ns, last_stats_ns, last_frame_ns;
    uint64_t seen_drops, pending_drops;
    lt_dpdk_stats st;
} dpdk_src;

static const uint8_t empty_frame[1];

static int read_stats(dpdk_src *s, lt_reader_info *info) {
    struct rte_eth_stats es;
    pthread_mutex_lock(&s->port->mu);
    int r = rte_eth_stats_get(s->port->id, &es);
    pthread_mutex_unlock(&s->port->mu);
    if (r != 0) {
        info->error = LT_ERR_IO;
        snprintf(info->message, sizeof info->message, "rte_eth_stats_get: %s", rte_strerror(-r));
        return LT_ERR_IO;
    }
    if (s->port->queues == 1)
        s->st.rx_packets = es.ipackets;
    else if (s->queue < RTE_ETHDEV_QUEUE_STAT_CNTRS)
        s->st.rx_packets = es.q_ipackets[s->queue];
    else
        s->st.rx_packets = s->st.frames; /* no per-queue counter: our own count */
    if (s->queue == 0) {
        s->st.imissed = es.imissed;
        s->st.rx_nombuf = es.rx_nombuf;
        s->st.ierrors = es.ierrors;
        uint64_t total = es.imissed + es.rx_nombuf + es.ierrors;
        if (total > s->seen_drops) {
            s->pending_drops += total - s->seen_drops;
            s->seen_drops = total;
        }
    }
    s->last_stats_ns = lt_mono_ns();
    return LT_OK;
}

static void emit_gap(dpdk_src *s, lt_frame *f) {
    uint32_t c = s->pending_drops > UINT32_MAX ? UINT32_MAX : (uint32_t)s->pending_drops;
    memset(f, 0, sizeof *f);
    f->data = empty_frame;
    f->ts_ns = lt_real_ns();
    f->wire_len = c;
    f->linktype = 1;
    f->rflags = LT_RF_GAP;
    s->pending_drops -= c;
    s->st.gaps++;
    s->st.drops_declared += c;
}

static void free_held(dpdk_src *s) {
    if (s->nheld) rte_pktmbuf_free_bulk(s->held, s->nheld);
    s->nheld = 0;
}

/* Threads that are not EAL lcores get an lcore id (and so a mempool cache) on their first call. */
static void register_thread(dpdk_src *s) {
    if (rte_lcore_id() == LCORE_ID_ANY) rte_thread_register();
    unsigned id = rte_lcore_id();
    s->st.lcore = id == LCORE_ID_ANY ? -1 : (int)id;
}

static int dpdk_next(void *src, lt_frame *frames, size_t max, size_t *n, lt_reader_info *info) {
    dpdk_src *s = src;
    size_t k = 0;
    *n = 0;
    info->linktype = 1;
    info->snaplen = RTE_MBUF_DEFAULT_DATAROOM;
    if (s->done) return LT_EOF;
    free_held(s);
    if (s->st.lcore == -2) register_thread(s);
    int64_t t = lt_mono_ns();
    if (t - s->last_return_ns >= (int64_t)s->poll_ms * 1000000) {
        s->last_return_ns = t;
        return LT_OK;
    }
    uint32_t empty = 0;
    for (;;) {
        while (s->pending_drops && k < max) emit_gap(s, &frames[k++]);
        if (k == max) break;
        int stopping = __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
        size_t room = max - k;
        if (room > HOLD_MAX - s->nheld) room = HOLD_MAX - s->nheld;
        uint16_t got = 0;
        if ((!stopping || s->drain) && room)
            got = rte_eth_rx_burst(s->port->id, s->queue, s->held + s->nheld, (uint16_t)(room < BURST ? room : BURST));
        if (got) {
            int64_t ts = lt_real_ns();
            for (uint16_t i = 0; i < got; i++) {
                struct rte_mbuf *m = s->held[s->nheld + i];
                lt_frame *f = &frames[k++];
                f->data = rte_pktmbuf_mtod(m, const uint8_t *);
                f->offset = s->st.frames + i;
                f->caplen = m->data_len;
                f->wire_len = m->pkt_len;
                if (m->nb_segs > 1) s->st.multi_segment++;
                if (s->port->ts_off >= 0 && (m->ol_flags & s->port->ts_flag)) {
                    f->ts_ns = (int64_t)*RTE_MBUF_DYNFIELD(m, s->port->ts_off, rte_mbuf_timestamp_t *) * 1000;
                    s->st.pmd_timestamps++;
                } else {
                    f->ts_ns = ts;
                }
                f->linktype = 1;
                f->interface_id = 0;
                f->rflags = 0;
                f->section = 0;
            }
            s->nheld += got;
            s->st.frames += got;
            s->st.bursts++;
            s->last_frame_ns = lt_mono_ns();
            empty = 0;
            if (got == BURST && k < max && s->nheld < HOLD_MAX) continue; /* more waiting: take it in this batch */
            if (s->last_frame_ns - s->last_stats_ns >= STATS_EVERY_NS && read_stats(s, info) != LT_OK) break;
            break;
        }
        if (k > 0) break;
        int64_t now = lt_mono_ns();
        if (stopping && (!s->drain || now - (s->last_frame_ns > s->stop_ns ? s->last_frame_ns : s->stop_ns) >=
                                          (int64_t)s->poll_ms * 1000000)) {
            int st = read_stats(s, info);
            if (st != LT_OK) return st;
            if (s->pending_drops) continue;
            s->done = 1;
            return LT_EOF;
        }
        if (++empty > EMPTY_SPINS) {
            struct timespec d = {0, IDLE_SLEEP_US * 1000};
            nanosleep(&d, NULL);
        }
        if (now - s->last_return_ns >= (int64_t)s->poll_ms * 1000000) {
            int st = read_stats(s, info);
            if (st != LT_OK) return st;
            if (s->pending_drops || stopping) continue;
            s->last_return_ns = lt_mono_ns();
            return LT_OK; /* *n == 0: nothing arrived within poll_ms */
        }
    }
    *n = k;
    return LT_OK;
}

static void dpdk_close(void *src) {
    dpdk_src *s = src;
    if (!s) return;
    free_held(s);
    lt_dpdk_port_release(s->port);
    free(s);
}

static const lt_source_ops dpdk_ops = {dpdk_next, dpdk_close};

int lt_dpdk_open(void *port, uint32_t queue, uint32_t poll_ms, int pin_cpu, void **srcp, const void **opsp,
                 char *err, size_t errlen) {
    *srcp = NULL;
    *opsp = NULL;
    dpdk_port *p = port;
    if (!p || queue >= p->queues) {
        lt_errf(err, errlen, "dpdk: queue %u out of range", queue);
        return LT_ERR_ARG;
    }
    if (pin_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(pin_cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            lt_errf(err, errlen, "dpdk: pin to CPU %d: %s", pin_cpu, strerror(errno));
            return LT_ERR_ARG;
        }
    }
    dpdk_src *s = calloc(1, sizeof *s);
    if (!s) return LT_ERR_NOMEM;
    pthread_mutex_lock(&ports_mu);
    p->refs++;
    pthread_mutex_unlock(&ports_mu);
    s->port = p;
    s->queue = (uint16_t)queue;
    s->poll_ms = poll_ms ? poll_ms : DEFAULT_POLL_MS;
    s->st.port = p->id;
    s->st.queue = queue;
    s->st.queues = p->queues;
    s->st.mbufs = p->mbufs;
    s->st.rx_desc = p->rx_desc;
    s->st.rss = p->rss;
    s->st.lcore = -2; /* the reading thread registers on its first call */
    snprintf(s->st.driver, sizeof s->st.driver, "%s", p->driver);
    s->last_return_ns = s->last_stats_ns = lt_mono_ns();
    *srcp = s;
    *opsp = &dpdk_ops;
    return LT_OK;
}

int lt_dpdk_request_stop(void *src, int drain) {
    dpdk_src *s = src;
    if (!s) return LT_ERR_ARG;
    s->stop_ns = lt_mono_ns();
    s->drain = drain;
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    return LT_OK;
}

int lt_dpdk_get_stats(void *src, lt_dpdk_stats *out) {
    dpdk_src *s = src;
    if (!s) return LT_ERR_ARG;
    *out = s->st;
    if (out->lcore == -2) out->lcore = -1;
    return LT_OK;
}

void lt_dpdk_discard(void *src) { dpdk_close(src); }
