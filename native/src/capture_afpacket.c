/*
 * Live capture from a Linux interface: AF_PACKET, TPACKET_V3 receive ring (mmap), joined to a
 * PACKET_FANOUT hash group, wrapped in an lt_reader through lt_source_ops so the engine treats it
 * like a capture file (docs/capture.md).
 *
 * ---------------------------------------------------------------------------------------------
 * CONTRACT of next() (see also ledgertool.h, lt_reader_open_live)
 *
 * Zero copy: lt_frame.data points into a ring block. A block whose frames were all handed out is
 *   given back to the kernel (tp_status = TP_STATUS_KERNEL) at the start of the *following*
 *   next() call, so the caller may use the frames of one call until it calls again. A block that
 *   was only partly handed out stays ours until its last frame went out.
 * Idle: when no block is ready within poll_ms, next() returns LT_OK with *n == 0. That is not the
 *   end of the capture; the caller checks its own stop conditions and calls again. Under steady
 *   traffic next() also returns 0 frames once every poll_ms, so a caller that loops until it gets
 *   0 frames (lt_engine_fill) regains control at least that often.
 * Drops: PACKET_STATISTICS is read (and reset by the kernel) after every block and on every idle
 *   poll; tp_drops frames the ring had no room for become one LT_RF_GAP pseudo-frame
 *   (wire_len = count, caplen 0, ts = when noticed) at that point of the frame stream. Counts
 *   above UINT32_MAX are split over several GAP frames. tp_packets counts drops too, so after a
 *   stop: frames handed out + drops declared == kernel tp_packets.
 * Stop: lt_live_request_stop(r, drain). drain = 1: hand out every block the kernel retires until
 *   none is ready and block_ms + poll_ms have passed since the request (the open block retires
 *   after block_ms); drain = 0: hand out nothing more. Then the final statistics as a GAP, then
 *   LT_EOF.
 * VLAN: the kernel strips an 802.1Q/802.1ad tag into tp_vlan_tci before packet sockets see the
 *   frame; we put it back in place (PACKET_RESERVE leaves room in front of the MAC header), so the
 *   digest covers the bytes that were on the wire (what libpcap does too).
 * ---------------------------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <net/if_arp.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ledgertool.h"
#include "lt_internal.h"
#include "clock.h"

#define VLAN_TAG_LEN 4
#define DEFAULT_RING_KB 65536u
#define DEFAULT_BLOCK_MS 10u
#define DEFAULT_POLL_MS 100u
#define FRAME_SIZE 2048u /* only for the kernel's ring geometry checks; V3 packs frames in blocks */

typedef struct {
    int fd;
    uint8_t *map;
    size_t map_len;
    uint32_t block_size, block_nr, block_ms, poll_ms;
    uint32_t linktype;
    uint32_t cur;            /* block being handed out, or the next one to wait for */
    int holding;             /* cur block is ours (TP_STATUS_USER) and partly handed out */
    uint32_t left;           /* frames of cur still to hand out */
    uint8_t *next_pkt;       /* next tpacket3_hdr in cur */
    uint32_t release_first;  /* first of nrelease fully handed-out blocks, in ring order */
    uint32_t nrelease;
    volatile int stop, drain;
    int64_t stop_deadline_ns;
    int64_t last_return_ns;  /* last time next() returned 0 frames (the caller's turn) */
    int done;
    uint64_t pending_drops;  /* read from the kernel, not yet handed out as GAP frames */
    uint32_t fanout_group;   /* PACKET_FANOUT group joined, 0: none */
    lt_live_stats st;
} live_src;

static const uint8_t empty_frame[1];

static inline struct tpacket_block_desc *block_at(live_src *s, uint32_t i) {
    return (struct tpacket_block_desc *)(s->map + (size_t)i * s->block_size);
}

/* Give back the blocks handed out completely by the previous call. */
static void release_blocks(live_src *s) {
    for (uint32_t i = 0; i < s->nrelease; i++) {
        struct tpacket_block_desc *b = block_at(s, (s->release_first + i) % s->block_nr);
        __atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    }
    s->nrelease = 0;
}

static int read_stats(live_src *s, lt_reader_info *info) {
    struct tpacket_stats_v3 ks;
    socklen_t len = sizeof ks;
    memset(&ks, 0, sizeof ks);
    if (getsockopt(s->fd, SOL_PACKET, PACKET_STATISTICS, &ks, &len) != 0) {
        info->error = LT_ERR_IO;
        snprintf(info->message, sizeof info->message, "getsockopt(PACKET_STATISTICS): %s", strerror(errno));
        return LT_ERR_IO;
    }
    s->st.kernel_packets += ks.tp_packets; /* includes tp_drops (TPACKET_V3) */
    s->st.kernel_drops += ks.tp_drops;
    s->st.freeze_count += ks.tp_freeze_q_cnt;
    s->pending_drops += ks.tp_drops;
    return LT_OK;
}

static void emit_gap(live_src *s, lt_frame *f) {
    uint32_t c = s->pending_drops > UINT32_MAX ? UINT32_MAX : (uint32_t)s->pending_drops;
    memset(f, 0, sizeof *f);
    f->data = empty_frame;
    f->ts_ns = lt_real_ns();
    f->wire_len = c;
    f->linktype = s->linktype;
    f->rflags = LT_RF_GAP;
    s->pending_drops -= c;
    s->st.gaps++;
    s->st.drops_declared += c;
}

static void take_frame(live_src *s, struct tpacket_block_desc *b, lt_frame *f) {
    struct tpacket3_hdr *h = (struct tpacket3_hdr *)s->next_pkt;
    uint32_t status = h->tp_status, next_off = h->tp_next_offset;
    uint32_t cap = h->tp_snaplen, wire = h->tp_len;
    uint16_t tci = h->hv1.tp_vlan_tci, tpid = h->hv1.tp_vlan_tpid;
    uint8_t *mac = s->next_pkt + h->tp_mac;
    if ((status & TP_STATUS_VLAN_VALID || tci != 0) && s->linktype == 1 && cap >= 12 &&
        h->tp_mac >= sizeof(struct tpacket3_hdr) + VLAN_TAG_LEN) {
        /* header fields are read above; the bytes in front of the MAC header (sockaddr_ll and the
         * PACKET_RESERVE room) are free to overwrite. */
        memmove(mac - VLAN_TAG_LEN, mac, 12);
        mac -= VLAN_TAG_LEN;
        uint16_t t = (status & TP_STATUS_VLAN_TPID_VALID) && tpid ? tpid : ETH_P_8021Q;
        mac[12] = (uint8_t)(t >> 8);
        mac[13] = (uint8_t)t;
        mac[14] = (uint8_t)(tci >> 8);
        mac[15] = (uint8_t)tci;
        cap += VLAN_TAG_LEN;
        wire += VLAN_TAG_LEN;
        s->st.vlan_restored++;
    }
    f->data = mac;
    f->offset = b->hdr.bh1.seq_num;
    f->ts_ns = (int64_t)h->tp_sec * 1000000000 + h->tp_nsec;
    f->caplen = cap;
    f->wire_len = wire;
    f->linktype = s->linktype;
    f->interface_id = 0;
    f->rflags = 0;
    f->section = 0;
    s->next_pkt += next_off;
    s->left--;
    s->st.frames++;
}

static int live_next(void *src, lt_frame *frames, size_t max, size_t *n, lt_reader_info *info) {
    live_src *s = src;
    size_t k = 0;
    *n = 0;
    info->linktype = s->linktype;
    info->snaplen = s->block_size;
    if (s->done) return LT_EOF;
    release_blocks(s);
    /* Under steady traffic the engine would keep calling; hand control back at least every
     * poll_ms so the caller can check its stop conditions and segment age. */
    int64_t t = lt_mono_ns();
    if (t - s->last_return_ns >= (int64_t)s->poll_ms * 1000000) {
        s->last_return_ns = t;
        return LT_OK;
    }
    for (;;) {
        while (s->pending_drops && k < max) emit_gap(s, &frames[k++]);
        if (k == max) break;
        int stopping = __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE); /* set by another thread too */
        int64_t now = stopping ? lt_mono_ns() : 0;
        if (!s->holding || stopping) {
            struct tpacket_block_desc *b = block_at(s, s->cur);
            int ready = (__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0;
            /* a block still waiting for release (ring wrapped inside one call) is not new */
            if (s->nrelease && s->cur == s->release_first) ready = 0;
            if (stopping && (!s->drain || now >= s->stop_deadline_ns)) {
                /* the end: final statistics as GAP frames, then LT_EOF */
                int st = read_stats(s, info);
                if (st != LT_OK) {
                    *n = k;
                    return k ? LT_OK : st;
                }
                if (s->pending_drops) continue;
                s->done = 1;
                *n = k;
                return k ? LT_OK : LT_EOF;
            }
            if (s->holding) {
                /* stopping with drain: finish the block in hand first */
            } else if (!ready) {
                if (k > 0) break;
                if (s->nrelease) break; /* whole ring handed out in this call */
                int64_t wait_ms = s->poll_ms;
                if (stopping) {
                    int64_t rem = (s->stop_deadline_ns - now) / 1000000 + 1;
                    if (rem < wait_ms) wait_ms = rem;
                }
                struct pollfd p = {.fd = s->fd, .events = POLLIN | POLLRDNORM | POLLERR};
                int pr = poll(&p, 1, (int)wait_ms);
                if (pr < 0 && errno != EINTR) {
                    info->error = LT_ERR_IO;
                    snprintf(info->message, sizeof info->message, "poll: %s", strerror(errno));
                    return LT_ERR_IO;
                }
                if (pr > 0 && (p.revents & POLLERR)) {
                    int soerr = 0;
                    socklen_t sl = sizeof soerr;
                    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
                    if (soerr == ENETDOWN || soerr == ENXIO || soerr == ENODEV) {
                        info->error = LT_ERR_IO;
                        snprintf(info->message, sizeof info->message, "interface went away: %s",
                                 strerror(soerr));
                        return LT_ERR_IO;
                    }
                }
                if ((__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0)
                    continue;
                /* idle: look at the drop counters, then let the caller check its stop conditions */
                int st = read_stats(s, info);
                if (st != LT_OK) return st;
                if (s->pending_drops) continue;
                if (stopping) continue;
                s->last_return_ns = lt_mono_ns();
                return LT_OK; /* *n == 0: nothing arrived within poll_ms */
            } else {
                s->holding = 1;
                s->left = b->hdr.bh1.num_pkts;
                s->next_pkt = (uint8_t *)b + b->hdr.bh1.offset_to_first_pkt;
                s->st.blocks++;
            }
        }
        struct tpacket_block_desc *b = block_at(s, s->cur);
        while (s->left && k < max) take_frame(s, b, &frames[k++]);
        if (s->left == 0) { /* handed out completely: give it back on the next call */
            if (s->nrelease == 0) s->release_first = s->cur;
            s->nrelease++;
            s->holding = 0;
            s->cur = (s->cur + 1) % s->block_nr;
            int st = read_stats(s, info);
            if (st != LT_OK) break;
        }
    }
    *n = k;
    return LT_OK;
}

static void live_close(void *src) {
    live_src *s = src;
    if (!s) return;
    if (s->map && s->map != MAP_FAILED) munmap(s->map, s->map_len);
    if (s->fd >= 0) close(s->fd);
    free(s);
}

static const lt_source_ops live_ops = {live_next, live_close};

static uint32_t pow2_floor(uint32_t v) {
    uint32_t p = 1;
    while (p <= v / 2) p <<= 1;
    return v ? p : 0;
}

static int fail(live_src *s, char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(live_src *s, char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    live_close(s);
    return code;
}

int lt_reader_open_live(const lt_live_config *cfg, lt_reader **out, char *err, size_t errlen) {
    *out = NULL;
    if (!cfg || !cfg->ifname || !cfg->ifname[0] || strlen(cfg->ifname) >= IFNAMSIZ) {
        lt_errf(err, errlen, "live capture: missing or too long interface name");
        return LT_ERR_ARG;
    }
    const char *ifn = cfg->ifname;
    unsigned ifindex = if_nametoindex(ifn);
    if (!ifindex) {
        lt_errf(err, errlen, "iface:%s: no such interface (%s)", ifn, strerror(errno));
        return LT_ERR_ARG;
    }
    uint32_t page = (uint32_t)sysconf(_SC_PAGESIZE);
    uint32_t ring_kb = cfg->ring_kb ? cfg->ring_kb : DEFAULT_RING_KB;
    uint32_t block_kb = cfg->block_kb;
    if (block_kb == 0) {
        block_kb = pow2_floor(ring_kb / 8);
        if (block_kb > 1024) block_kb = 1024;
        if (block_kb < 64) block_kb = pow2_floor(ring_kb / 2) < 64 ? pow2_floor(ring_kb / 2) : 64;
    }
    if (block_kb == 0 || (block_kb & (block_kb - 1)) || (block_kb * 1024u) % page || block_kb > 65536) {
        lt_errf(err, errlen, "iface:%s: block size %u KiB must be a power of two, a multiple of the "
                "page size (%u bytes) and at most 64 MiB", ifn, block_kb, page);
        return LT_ERR_ARG;
    }
    uint32_t block_nr = ring_kb / block_kb;
    if ((uint64_t)block_kb * 1024u / FRAME_SIZE * block_nr > UINT32_MAX) { /* tp_frame_nr is a u32 */
        lt_errf(err, errlen, "iface:%s: ring of %u KiB is too large for the kernel's frame count", ifn, ring_kb);
        return LT_ERR_ARG;
    }
    if (block_nr < 2) {
        lt_errf(err, errlen, "iface:%s: ring of %u KiB holds fewer than 2 blocks of %u KiB", ifn, ring_kb,
                block_kb);
        return LT_ERR_ARG;
    }

    live_src *s = calloc(1, sizeof *s);
    if (!s) return LT_ERR_NOMEM;
    s->fd = -1;
    s->block_size = block_kb * 1024u;
    s->block_nr = block_nr;
    s->block_ms = cfg->block_ms ? cfg->block_ms : DEFAULT_BLOCK_MS;
    s->poll_ms = cfg->poll_ms ? cfg->poll_ms : DEFAULT_POLL_MS;

    /* Protocol 0: the socket receives nothing until it is bound to the interface, so no frame of
     * another interface ever lands in the ring. */
    s->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return fail(s, err, errlen, LT_ERR_IO, "iface:%s: socket(AF_PACKET): %s%s", ifn, strerror(errno),
                    errno == EPERM ? " (needs root or CAP_NET_RAW)" : "");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, ifn, strlen(ifn));
    if (ioctl(s->fd, SIOCGIFHWADDR, &ifr) != 0)
        return fail(s, err, errlen, LT_ERR_IO, "iface:%s: SIOCGIFHWADDR: %s", ifn, strerror(errno));
    switch (ifr.ifr_hwaddr.sa_family) {
    case ARPHRD_ETHER:
    case ARPHRD_LOOPBACK:
        s->linktype = 1; /* LINKTYPE_ETHERNET */
        break;
    case ARPHRD_NONE:
        s->linktype = 101; /* LINKTYPE_RAW: tun-style devices hand out bare IP packets */
        break;
    default:
        return fail(s, err, errlen, LT_ERR_ARG, "iface:%s: unsupported device type ARPHRD %u", ifn,
                    ifr.ifr_hwaddr.sa_family);
    }
    int v = TPACKET_V3;
    if (setsockopt(s->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) != 0)
        return fail(s, err, errlen, LT_ERR_IO, "iface:%s: PACKET_VERSION TPACKET_V3: %s", ifn, strerror(errno));
    unsigned reserve = VLAN_TAG_LEN;
    if (setsockopt(s->fd, SOL_PACKET, PACKET_RESERVE, &reserve, sizeof reserve) != 0)
        return fail(s, err, errlen, LT_ERR_IO, "iface:%s: PACKET_RESERVE: %s", ifn, strerror(errno));
    struct tpacket_req3 req;
    memset(&req, 0, sizeof req);
    req.tp_block_size = s->block_size;
    req.tp_block_nr = s->block_nr;
    req.tp_frame_size = FRAME_SIZE;
    req.tp_frame_nr = (s->block_size / FRAME_SIZE) * s->block_nr;
    req.tp_retire_blk_tov = s->block_ms;
    if (setsockopt(s->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0)
        return fail(s, err, errlen, LT_ERR_IO, "iface:%s: PACKET_RX_RING (%u blocks of %u bytes): %s", ifn,
                    s->block_nr, s->block_size, strerror(errno));
    s->map_len = (size_t)s->block_size * s->block_nr;
    s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s->fd, 0);
    if (s->map == MAP_FAILED)
        return fail(s, err, errlen, LT_ERR_IO, "iface:%s: mmap of the %zu-byte ring: %s", ifn, s->map_len,
                    strerror(errno));
    struct sockaddr_ll ll;
    memset(&ll, 0, sizeof ll);
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_ALL);
    ll.sll_ifindex = (int)ifindex;
    if (bind(s->fd, (struct sockaddr *)&ll, sizeof ll) != 0)
        return fail(s, err, errlen, LT_ERR_IO, "iface:%s: bind: %s", ifn, strerror(errno));
    if (cfg->promisc) {
        struct packet_mreq mr;
        memset(&mr, 0, sizeof mr);
        mr.mr_ifindex = (int)ifindex;
        mr.mr_type = PACKET_MR_PROMISC;
        if (setsockopt(s->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0)
            return fail(s, err, errlen, LT_ERR_IO, "iface:%s: promiscuous mode: %s", ifn, strerror(errno));
    }
    /* Fanout (hash of the flow), several workers only: one ring needs no group, and any
     * CAP_NET_RAW process in the namespace that joins a group takes its share of the frames
     * silently. The first worker makes a group with an unpredictable id (it was pid & 0xffff, which
     * another process guessed and joined); the others join it by id. A member that is not ours is
     * still possible (16 bits can be scanned), so capture counts every frame of the interface
     * outside the group and declares what no ring of ours received (ledgertool/capture/workers.py,
     * FanoutWitness). No PACKET_FANOUT_FLAG_DEFRAG: it would reassemble IP fragments. */
    if (cfg->fanout) {
        if (cfg->fanout_group > 0xFFFFu)
            return fail(s, err, errlen, LT_ERR_ARG, "iface:%s: fanout group %u is not a 16-bit id", ifn,
                        cfg->fanout_group);
        int rc = -1;
        uint16_t group = 0;
        for (int attempt = 0; attempt < 8 && rc != 0; attempt++) {
            group = (uint16_t)cfg->fanout_group;
            while (!group)  /* a random id: getrandom never blocks for 2 bytes once the pool is ready */
                if (getrandom(&group, sizeof group, 0) != sizeof group)
                    return fail(s, err, errlen, LT_ERR_IO, "iface:%s: getrandom: %s", ifn, strerror(errno));
            int fan = (int)(group | ((uint32_t)PACKET_FANOUT_HASH << 16));
            rc = setsockopt(s->fd, SOL_PACKET, PACKET_FANOUT, &fan, sizeof fan);
            if (rc == 0) s->fanout_group = group;
            /* EINVAL: a random id that another process uses with another mode; draw again */
            else if (cfg->fanout_group || errno != EINVAL) break;
        }
        if (rc != 0)
            return fail(s, err, errlen, LT_ERR_IO, "iface:%s: PACKET_FANOUT group %u: %s", ifn, group,
                        strerror(errno));
    }
    if (cfg->pin_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cfg->pin_cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            return fail(s, err, errlen, LT_ERR_ARG, "iface:%s: pin to CPU %d: %s", ifn, cfg->pin_cpu,
                        strerror(errno));
    }
    s->last_return_ns = lt_mono_ns();
    s->st.ring_bytes = (uint32_t)s->map_len;
    s->st.block_bytes = s->block_size;
    s->st.block_count = s->block_nr;

    lt_reader *r = lt_reader_from_source(&live_ops, s, LT_FMT_LIVE);
    if (!r) {
        live_close(s);
        return LT_ERR_NOMEM;
    }
    *out = r;
    return LT_OK;
}

int lt_live_request_stop(lt_reader *r, int drain) {
    live_src *s = lt_reader_source(r, &live_ops);
    if (!s) return LT_ERR_ARG;
    s->stop_deadline_ns = lt_mono_ns() + (int64_t)(s->block_ms + s->poll_ms) * 1000000;
    s->drain = drain;
    /* may run on another thread than next() (several workers): deadline and drain before stop */
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    return LT_OK;
}

int lt_live_get_stats(const lt_reader *r, lt_live_stats *out) {
    live_src *s = lt_reader_source(r, &live_ops);
    if (!s) return LT_ERR_ARG;
    *out = s->st;
    return LT_OK;
}

int lt_live_get_fanout(const lt_reader *r, uint32_t *group) {
    live_src *s = lt_reader_source(r, &live_ops);
    if (!s) return LT_ERR_ARG;
    *group = s->fanout_group;
    return LT_OK;
}

int lt_live_sync_stats(lt_reader *r) {
    live_src *s = lt_reader_source(r, &live_ops);
    if (!s) return LT_ERR_ARG;
    lt_reader_info info;
    return read_stats(s, &info);
}
