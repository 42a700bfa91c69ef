/*
 * Live capture through AF_XDP: one XSK socket per RX queue, with its own UMEM, fill, completion
 * and RX rings (libxdp's xsk helpers), fed by a minimal XDP program of ours (libbpf, attached
 * through a BPF link), wrapped in an lt_reader through lt_source_ops (source_bypass.h,
 * docs/capture.md "Kernel bypass").
 *
 * ---------------------------------------------------------------------------------------------
 * The XDP program (hand-assembled below, no BPF compiler needed): for each frame it redirects
 * to xsks[rx_queue_index] (an XSKMAP; frames of a queue without a socket pass to the stack), and
 * when the redirect was taken it adds one to counts[rx_queue_index] (a per-CPU array). That
 * counter is the independent count of frames sent towards a socket: at the end
 *     xdp_packets == frames handed out + rx_dropped + rx_ring_full
 * holds exactly when nothing was lost unseen (capture.py warns otherwise). The BPF link detaches
 * the program when its fd closes, also when the process dies.
 *
 * CONTRACT of next() (as for AF_PACKET, capture_afpacket.c):
 * Zero copy: lt_frame.data points into the UMEM. The descriptors handed out by one call go back
 *   (RX ring released, frames re-queued on the fill ring) at the start of the following call.
 * No per-frame system call: one RX ring peek hands out up to `max` frames; poll() only when the
 *   ring is empty, recvfrom() only when the driver asks for a fill-ring wakeup, getsockopt()
 *   (statistics) at most once per millisecond while frames flow and on every idle poll.
 * Idle: LT_OK with *n == 0 when nothing arrived within poll_ms, and at least once every poll_ms
 *   under steady traffic.
 * Drops: XDP_STATISTICS rx_dropped + rx_ring_full (cumulative in the kernel) grow -> one
 *   LT_RF_GAP pseudo-frame with wire_len = the increase at that point of the stream.
 *   rx_fill_ring_empty_descs counts *times* the fill ring was empty, not frames (in copy mode
 *   those frames are already in rx_dropped; in zero-copy mode the NIC drops them and counts them
 *   in its own statistics), so it is reported, not declared.
 * Timestamps: AF_XDP carries none; every frame of one peek gets the CLOCK_REALTIME of the peek.
 * Stop: lt_xdp_request_stop removes the socket from the map (no new frames), then drain = 1
 *   hands out what the RX ring holds, waiting poll_ms for frames in flight; drain = 0 none.
 *   Then the final statistics as a GAP, then LT_EOF.
 * ---------------------------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <net/if_arp.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include "ledgertool.h"
#include "source_bypass.h"
#include "source_xdp.h"
#include "clock.h"

#define DEFAULT_UMEM_KB 16384u
#define DEFAULT_POLL_MS 100u
#define MIN_FRAMES 64u
#define STATS_EVERY_NS 1000000

/* ---- the XDP program, one per interface and process ---------------------------------------- */

typedef struct xdp_prog {
    struct xdp_prog *next;
    unsigned ifindex;
    int prog_fd, link_fd, xsks_fd, counts_fd;
    int native;
    uint32_t nqueues;
    int refs;
} xdp_prog;

static pthread_mutex_t progs_mu = PTHREAD_MUTEX_INITIALIZER;
static xdp_prog *progs;

#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

/* Returns the program's fd or -errno; the verifier's log goes to `log`. */
static int load_program(int xsks_fd, int counts_fd, char *log, size_t loglen) {
    const struct bpf_insn prog[] = {
        /* r6 = ctx->rx_queue_index; key on the stack at fp - 4 */
        INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_6, BPF_REG_1, offsetof(struct xdp_md, rx_queue_index), 0),
        INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_10, BPF_REG_6, -4, 0),
        /* r0 = bpf_redirect_map(xsks, queue, XDP_PASS) */
        INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, xsks_fd),
        INSN(0, 0, 0, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_6, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, XDP_PASS),
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map),
        /* not redirected (no socket on this queue): return it (XDP_PASS) */
        INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 10, XDP_REDIRECT),
        /* counts[queue] += 1 (per-CPU slot: no atomics needed) */
        INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, counts_fd),
        INSN(0, 0, 0, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
        INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4),
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
        INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 3, 0),
        INSN(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_1, BPF_REG_0, 0, 0),
        INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_1, 0, 0, 1),
        INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_0, BPF_REG_1, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, XDP_REDIRECT),
        INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    };
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_buf = log, .log_size = (uint32_t)loglen, .log_level = 1);
    if (log && loglen) log[0] = 0;
    int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "lt_xsk_redirect", "Dual MIT/GPL", prog,
                           sizeof prog / sizeof prog[0], &opts);
    return fd < 0 ? -errno : fd;
}

static void prog_free(xdp_prog *p) {
    if (p->link_fd >= 0) close(p->link_fd);
    if (p->prog_fd >= 0) close(p->prog_fd);
    if (p->xsks_fd >= 0) close(p->xsks_fd);
    if (p->counts_fd >= 0) close(p->counts_fd);
    free(p);
}

static const char *perm_hint(int e) {
    return e == EPERM || e == EACCES ? " (needs root, or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF and CAP_IPC_LOCK)" : "";
}

/* The interface's program: shared by every socket of this process on it. */
static int prog_acquire(unsigned ifindex, const char *ifn, uint32_t nqueues, int attach, xdp_prog **out,
                        char *err, size_t errlen) {
    pthread_mutex_lock(&progs_mu);
    for (xdp_prog *p = progs; p; p = p->next) {
        if (p->ifindex == ifindex) {
            p->refs++;
            *out = p;
            pthread_mutex_unlock(&progs_mu);
            return LT_OK;
        }
    }
    int st = LT_ERR_IO;
    xdp_prog *p = calloc(1, sizeof *p);
    if (!p) {
        pthread_mutex_unlock(&progs_mu);
        return LT_ERR_NOMEM;
    }
    p->prog_fd = p->link_fd = p->xsks_fd = p->counts_fd = -1;
    p->ifindex = ifindex;
    p->nqueues = nqueues;
    p->xsks_fd = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "lt_xsks", 4, 4, nqueues, NULL);
    if (p->xsks_fd < 0) {
        int e = errno;
        lt_errf(err, errlen, "xdp:%s: cannot create the XSKMAP: %s%s", ifn, strerror(e), perm_hint(e));
        goto fail;
    }
    p->counts_fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "lt_xsk_counts", 4, 8, nqueues, NULL);
    if (p->counts_fd < 0) {
        int e = errno;
        lt_errf(err, errlen, "xdp:%s: cannot create the counter map: %s%s", ifn, strerror(e), perm_hint(e));
        goto fail;
    }
    char log[2048];
    p->prog_fd = load_program(p->xsks_fd, p->counts_fd, log, sizeof log);
    if (p->prog_fd < 0) {
        int e = -p->prog_fd;
        char *nl = log;
        for (char *c = log; *c; c++) if (*c == '\n') *c = ' ';
        lt_errf(err, errlen, "xdp:%s: the kernel refused our XDP program: %s%s%s%.200s", ifn, strerror(e),
                perm_hint(e), *nl ? "; verifier: " : "", nl);
        goto fail;
    }
    /* driver (native) XDP first under "auto": generic XDP runs after the skb is built */
    int modes[2], nm = 0;
    if (attach != LT_XDP_ATTACH_SKB) modes[nm++] = XDP_FLAGS_DRV_MODE;
    if (attach != LT_XDP_ATTACH_NATIVE) modes[nm++] = XDP_FLAGS_SKB_MODE;
    int e = 0;
    for (int i = 0; i < nm && p->link_fd < 0; i++) {
        LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = (uint32_t)modes[i]);
        p->link_fd = bpf_link_create(p->prog_fd, (int)ifindex, BPF_XDP, &lo);
        if (p->link_fd < 0) {
            e = errno;
            if (e == EBUSY || e == EEXIST || e == EPERM || e == EACCES) break; /* not a mode problem */
        } else {
            p->native = modes[i] == XDP_FLAGS_DRV_MODE;
        }
    }
    if (p->link_fd < 0) {
        if (e == EBUSY || e == EEXIST)
            lt_errf(err, errlen, "xdp:%s: the interface already has an XDP program (another capture, or "
                    "`ip link set dev %s xdp off` to remove one attached by ip)", ifn, ifn);
        else
            lt_errf(err, errlen, "xdp:%s: cannot attach the XDP program (%s mode): %s%s", ifn,
                    attach == LT_XDP_ATTACH_NATIVE ? "native" : attach == LT_XDP_ATTACH_SKB ? "skb" : "native or skb",
                    strerror(e), perm_hint(e));
        goto fail;
    }
    p->refs = 1;
    p->next = progs;
    progs = p;
    pthread_mutex_unlock(&progs_mu);
    *out = p;
    return LT_OK;
fail:
    pthread_mutex_unlock(&progs_mu);
    prog_free(p);
    return st;
}

static void prog_release(xdp_prog *p) {
    if (!p) return;
    pthread_mutex_lock(&progs_mu);
    if (--p->refs == 0) {
        for (xdp_prog **pp = &progs; *pp; pp = &(*pp)->next) {
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        }
        prog_free(p);
    }
    pthread_mutex_unlock(&progs_mu);
}

/* ---- one socket --------------------------------------------------------------------------- */

typedef struct {
    int fd;
    struct xsk_umem *umem;
    struct xsk_socket *xsk;
    struct xsk_ring_prod fq;
    struct xsk_ring_cons cq;
    struct xsk_ring_cons rx;
    uint8_t *area;
    size_t area_len;
    uint32_t frame_size, nframes;
    uint32_t held, held_idx;   /* RX descriptors handed out by the last next(), returned by the next one */
    xdp_prog *prog;
    uint32_t queue, poll_ms;
    volatile int stop;
    int drain, unmapped, done;
    int64_t stop_deadline_ns, last_return_ns, last_stats_ns;
    uint64_t seen_drops;       /* rx_dropped + rx_ring_full already turned into pending_drops */
    uint64_t pending_drops;
    lt_xdp_stats st;
} xdp_src;

static const uint8_t empty_frame[1];

static int read_stats(xdp_src *s, lt_reader_info *info) {
    struct xdp_statistics x;
    socklen_t len = sizeof x;
    memset(&x, 0, sizeof x);
    if (getsockopt(s->fd, SOL_XDP, XDP_STATISTICS, &x, &len) != 0) {
        info->error = LT_ERR_IO;
        snprintf(info->message, sizeof info->message, "getsockopt(XDP_STATISTICS): %s", strerror(errno));
        return LT_ERR_IO;
    }
    /* a kernel without the extra fields folds rx_ring_full into rx_dropped (they stay 0 here) */
    s->st.rx_dropped = x.rx_dropped;
    s->st.rx_ring_full = x.rx_ring_full;
    s->st.rx_fill_ring_empty_descs = x.rx_fill_ring_empty_descs;
    s->st.rx_invalid_descs = x.rx_invalid_descs;
    uint64_t total = x.rx_dropped + x.rx_ring_full;
    if (total > s->seen_drops) {
        s->pending_drops += total - s->seen_drops;
        s->seen_drops = total;
    }
    s->last_stats_ns = lt_mono_ns();
    return LT_OK;
}

static void emit_gap(xdp_src *s, lt_frame *f) {
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

/* Give back what the previous call handed out: fill ring first (the kernel can reuse the frames),
 * then the RX descriptors. The fill ring has room for every UMEM frame, so this cannot fail. */
static void release_held(xdp_src *s) {
    if (!s->held) return;
    uint32_t fidx = 0;
    uint32_t got = xsk_ring_prod__reserve(&s->fq, s->held, &fidx);
    uint64_t mask = ~(uint64_t)(s->frame_size - 1);
    for (uint32_t i = 0; i < got; i++)
        *xsk_ring_prod__fill_addr(&s->fq, fidx + i) = xsk_ring_cons__rx_desc(&s->rx, s->held_idx + i)->addr & mask;
    xsk_ring_prod__submit(&s->fq, got);
    xsk_ring_cons__release(&s->rx, s->held);
    s->held = 0;
    if (xsk_ring_prod__needs_wakeup(&s->fq)) {
        recvfrom(s->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
        s->st.wakeups++;
    }
}

static int xdp_next(void *src, lt_frame *frames, size_t max, size_t *n, lt_reader_info *info) {
    xdp_src *s = src;
    size_t k = 0;
    *n = 0;
    info->linktype = 1;
    info->snaplen = s->frame_size;
    if (s->done) return LT_EOF;
    release_held(s);
    int64_t t = lt_mono_ns();
    if (t - s->last_return_ns >= (int64_t)s->poll_ms * 1000000) {
        s->last_return_ns = t;
        return LT_OK;
    }
    for (;;) {
        while (s->pending_drops && k < max) emit_gap(s, &frames[k++]);
        if (k == max) break;
        int stopping = __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE); /* set by another thread too */
        uint32_t idx = 0, got = 0;
        if (!stopping || s->drain) {
            size_t want = max - k;
            got = xsk_ring_cons__peek(&s->rx, want > UINT32_MAX ? UINT32_MAX : (uint32_t)want, &idx);
        }
        if (got) {
            int64_t ts = lt_real_ns();
            for (uint32_t i = 0; i < got; i++) {
                const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, idx + i);
                lt_frame *f = &frames[k++];
                f->data = xsk_umem__get_data(s->area, d->addr);
                f->offset = s->st.frames + i;
                f->ts_ns = ts;
                f->caplen = f->wire_len = d->len;
                f->linktype = 1;
                f->interface_id = 0;
                f->rflags = 0;
                f->section = 0;
            }
            s->held = got;
            s->held_idx = idx;
            s->st.frames += got;
            s->st.batches++;
            if (lt_mono_ns() - s->last_stats_ns >= STATS_EVERY_NS && read_stats(s, info) != LT_OK) break;
            break; /* these descriptors are returned on the next call; hand them out now */
        }
        if (k > 0) break;
        int64_t now = lt_mono_ns();
        if (stopping && (!s->drain || now >= s->stop_deadline_ns)) {
            int st = read_stats(s, info);
            if (st != LT_OK) return st;
            if (s->pending_drops) continue;
            s->done = 1;
            return LT_EOF;
        }
        int64_t wait_ms = s->poll_ms;
        if (stopping) {
            int64_t rem = (s->stop_deadline_ns - now) / 1000000 + 1;
            if (rem < wait_ms) wait_ms = rem;
        }
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)wait_ms);
        if (pr < 0 && errno != EINTR) {
            info->error = LT_ERR_IO;
            snprintf(info->message, sizeof info->message, "poll: %s", strerror(errno));
            return LT_ERR_IO;
        }
        if (pr > 0 && (p.revents & (POLLERR | POLLNVAL))) {
            info->error = LT_ERR_IO;
            snprintf(info->message, sizeof info->message, "queue %u: the socket reported an error (interface gone?)",
                     s->queue);
            return LT_ERR_IO;
        }
        if (xsk_cons_nb_avail(&s->rx, 1)) continue;
        int st = read_stats(s, info);
        if (st != LT_OK) return st;
        if (s->pending_drops || stopping) continue;
        s->last_return_ns = lt_mono_ns();
        return LT_OK; /* *n == 0: nothing arrived within poll_ms */
    }
    *n = k;
    return LT_OK;
}

static void unmap_socket(xdp_src *s) {
    if (s->prog && !s->unmapped) {
        uint32_t q = s->queue;
        bpf_map_delete_elem(s->prog->xsks_fd, &q);
        s->unmapped = 1;
    }
}

static void xdp_close(void *src) {
    xdp_src *s = src;
    if (!s) return;
    unmap_socket(s);
    if (s->xsk) xsk_socket__delete(s->xsk);
    if (s->umem) xsk_umem__delete(s->umem);
    if (s->area && s->area != MAP_FAILED) munmap(s->area, s->area_len);
    prog_release(s->prog);
    free(s);
}

static const lt_source_ops xdp_ops = {xdp_next, xdp_close};

/* libbpf and libxdp print to stderr by default; our errors are one line with the cause instead. */
static int quiet_bpf(enum libbpf_print_level level, const char *fmt, va_list ap) { return 0; }
static int quiet_xdp(enum libxdp_print_level level, const char *fmt, va_list ap) { return 0; }

uint32_t lt_xdp_layout(void) { return LT_SOURCE_LAYOUT; }

int lt_xdp_rx_queues(const char *ifname) {
    char path[96];
    snprintf(path, sizeof path, "/sys/class/net/%s/queues", ifname);
    DIR *d = opendir(path);
    if (!d) return -errno;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "rx-", 3)) n++;
    closedir(d);
    return n;
}

static uint32_t pow2_floor(uint64_t v) {
    uint32_t p = 1;
    while ((uint64_t)p * 2 <= v && p < (1u << 30)) p <<= 1;
    return p;
}

static int fail(xdp_src *s, char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(xdp_src *s, char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    xdp_close(s);
    return code;
}

/* UMEM + socket with the given bind flags; on failure everything of this attempt is freed. */
static int make_socket(xdp_src *s, const char *ifn, uint16_t bind_flags) {
    struct xsk_umem_config uc = {.fill_size = s->nframes, .comp_size = 64, .frame_size = s->frame_size,
                                 .frame_headroom = 0, .flags = 0};
    int r = xsk_umem__create(&s->umem, s->area, s->area_len, &s->fq, &s->cq, &uc);
    if (r) {
        s->umem = NULL;
        return r;
    }
    struct xsk_socket_config sc = {.rx_size = s->nframes, .tx_size = 0,
                                   .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD, .xdp_flags = 0,
                                   .bind_flags = (uint16_t)(bind_flags | XDP_USE_NEED_WAKEUP)};
    r = xsk_socket__create(&s->xsk, ifn, s->queue, s->umem, &s->rx, NULL, &sc);
    if (r) {
        s->xsk = NULL;
        xsk_umem__delete(s->umem);
        s->umem = NULL;
    }
    return r;
}

int lt_xdp_open(const lt_xdp_config *cfg, void **srcp, const void **opsp, char *err, size_t errlen) {
    *srcp = NULL;
    *opsp = NULL;
    libbpf_set_print(quiet_bpf);
    libxdp_set_print(quiet_xdp);
    if (!cfg || !cfg->ifname || !cfg->ifname[0] || strlen(cfg->ifname) >= IFNAMSIZ) {
        lt_errf(err, errlen, "xdp: missing or too long interface name");
        return LT_ERR_ARG;
    }
    const char *ifn = cfg->ifname;
    unsigned ifindex = if_nametoindex(ifn);
    if (!ifindex) {
        lt_errf(err, errlen, "xdp:%s: no such interface (%s)", ifn, strerror(errno));
        return LT_ERR_ARG;
    }
    int nq = lt_xdp_rx_queues(ifn);
    if (nq <= 0) {
        lt_errf(err, errlen, "xdp:%s: cannot count its RX queues (/sys/class/net/%s/queues: %s)", ifn, ifn,
                nq < 0 ? strerror(-nq) : "none");
        return LT_ERR_ARG;
    }
    if (cfg->queue >= (uint32_t)nq) {
        lt_errf(err, errlen, "xdp:%s:%u: queue %u out of range (%s has %d RX queue%s: 0..%d)", ifn, cfg->queue,
                cfg->queue, ifn, nq, nq == 1 ? "" : "s", nq - 1);
        return LT_ERR_ARG;
    }
    uint32_t fs = cfg->frame_size ? cfg->frame_size : XSK_UMEM__DEFAULT_FRAME_SIZE;
    if (fs != 2048 && fs != 4096) {
        lt_errf(err, errlen, "xdp:%s: UMEM frame size %u must be 2048 or 4096", ifn, fs);
        return LT_ERR_ARG;
    }
    uint64_t umem = (uint64_t)(cfg->umem_kb ? cfg->umem_kb : DEFAULT_UMEM_KB) * 1024;
    if (umem / fs < MIN_FRAMES) {
        lt_errf(err, errlen, "xdp:%s: UMEM of %llu KiB holds fewer than %u frames of %u bytes", ifn,
                (unsigned long long)(umem / 1024), MIN_FRAMES, fs);
        return LT_ERR_ARG;
    }
    /* AF_XDP hands out Ethernet frames; refuse other device types as AF_PACKET does */
    {
        int sfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        memcpy(ifr.ifr_name, ifn, strlen(ifn));
        int ok = sfd >= 0 && ioctl(sfd, SIOCGIFHWADDR, &ifr) == 0;
        if (sfd >= 0) close(sfd);
        if (ok && ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) {
            lt_errf(err, errlen, "xdp:%s: unsupported device type ARPHRD %u (AF_XDP capture needs Ethernet)", ifn,
                    ifr.ifr_hwaddr.sa_family);
            return LT_ERR_ARG;
        }
    }

    xdp_src *s = calloc(1, sizeof *s);
    if (!s) return LT_ERR_NOMEM;
    s->fd = -1;
    s->queue = cfg->queue;
    s->poll_ms = cfg->poll_ms ? cfg->poll_ms : DEFAULT_POLL_MS;
    s->frame_size = fs;
    s->nframes = pow2_floor(umem / fs);
    s->area_len = (size_t)s->nframes * fs;
    s->area = mmap(NULL, s->area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (s->area == MAP_FAILED)
        return fail(s, err, errlen, LT_ERR_IO, "xdp:%s: mmap of the %zu-byte UMEM: %s", ifn, s->area_len,
                    strerror(errno));
    int st = prog_acquire(ifindex, ifn, (uint32_t)nq, cfg->attach, &s->prog, err, errlen);
    if (st != LT_OK) {
        s->prog = NULL;
        xdp_close(s);
        return st;
    }
    int r;
    if (cfg->mode == LT_XDP_MODE_COPY) {
        r = make_socket(s, ifn, XDP_COPY);
    } else {
        r = make_socket(s, ifn, XDP_ZEROCOPY);
        if (r && cfg->mode == LT_XDP_MODE_AUTO && r != -EPERM && r != -EBUSY)
            r = make_socket(s, ifn, XDP_COPY); /* the driver has no zero-copy support */
    }
    if (r) {
        int e = -r;
        if (e == EBUSY)
            return fail(s, err, errlen, LT_ERR_IO, "xdp:%s:%u: queue %u already has an AF_XDP socket (another "
                        "capture?)", ifn, s->queue, s->queue);
        return fail(s, err, errlen, LT_ERR_IO, "xdp:%s:%u: AF_XDP socket (%s mode, %u frames of %u bytes): %s%s%s",
                    ifn, s->queue, cfg->mode == LT_XDP_MODE_ZEROCOPY ? "zero-copy" :
                    cfg->mode == LT_XDP_MODE_COPY ? "copy" : "zero-copy or copy", s->nframes, fs, strerror(e),
                    perm_hint(e), e == ENOBUFS || e == ENOMEM ? " (locked-memory limit? raise RLIMIT_MEMLOCK or "
                    "lower --ring-mb)" : "");
    }
    s->fd = xsk_socket__fd(s->xsk);
    struct xdp_options opt = {0};
    socklen_t olen = sizeof opt;
    if (getsockopt(s->fd, SOL_XDP, XDP_OPTIONS, &opt, &olen) == 0)
        s->st.zero_copy = (opt.flags & XDP_OPTIONS_ZEROCOPY) != 0;
    /* every UMEM frame starts on the fill ring */
    uint32_t fidx = 0;
    if (xsk_ring_prod__reserve(&s->fq, s->nframes, &fidx) != s->nframes)
        return fail(s, err, errlen, LT_ERR_IO, "xdp:%s:%u: fill ring has no room for %u frames", ifn, s->queue,
                    s->nframes);
    for (uint32_t i = 0; i < s->nframes; i++) *xsk_ring_prod__fill_addr(&s->fq, fidx + i) = (uint64_t)i * fs;
    xsk_ring_prod__submit(&s->fq, s->nframes);
    r = xsk_socket__update_xskmap(s->xsk, s->prog->xsks_fd);
    if (r)
        return fail(s, err, errlen, LT_ERR_IO, "xdp:%s:%u: cannot insert the socket in the XSKMAP: %s", ifn,
                    s->queue, strerror(-r));
    if (cfg->pin_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cfg->pin_cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            return fail(s, err, errlen, LT_ERR_ARG, "xdp:%s: pin to CPU %d: %s", ifn, cfg->pin_cpu, strerror(errno));
    }
    s->st.queue = s->queue;
    s->st.umem_frames = s->nframes;
    s->st.frame_size = fs;
    s->st.ring_size = s->nframes;
    s->st.native = s->prog->native;
    s->last_return_ns = s->last_stats_ns = lt_mono_ns();
    *srcp = s;
    *opsp = &xdp_ops;
    return LT_OK;
}

int lt_xdp_request_stop(void *src, int drain) {
    xdp_src *s = src;
    if (!s) return LT_ERR_ARG;
    unmap_socket(s); /* no frame is redirected here from now on */
    s->stop_deadline_ns = lt_mono_ns() + (int64_t)s->poll_ms * 1000000;
    s->drain = drain;
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    return LT_OK;
}

int lt_xdp_get_stats(void *src, lt_xdp_stats *out) {
    xdp_src *s = src;
    if (!s) return LT_ERR_ARG;
    *out = s->st;
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu > 0 && ncpu <= 65536) {
        uint64_t *v = calloc((size_t)ncpu, sizeof *v);
        uint32_t q = s->queue;
        if (v && bpf_map_lookup_elem(s->prog->counts_fd, &q, v) == 0) {
            uint64_t sum = 0;
            for (int i = 0; i < ncpu; i++) sum += v[i];
            out->xdp_packets = sum;
        }
        free(v);
    }
    return LT_OK;
}

void lt_xdp_discard(void *src) { xdp_close(src); }
