/*
 * Replay: transmit the frames of a capture file on an interface through a PF_PACKET socket with
 * sendmmsg, at the file's own timing, a frame rate, a bit rate or top speed, K times over
 * (what tcpreplay does; docs/capture.md).
 *
 * The file is read once by the ordinary reader (mmap, zero copy); only Ethernet frames that the
 * kernel would accept are sent: caplen >= 14 and <= MTU + 14 (+ 4 when the frame carries a VLAN
 * tag). The rest are counted per reason, per loop, never sent silently altered. A frame whose
 * caplen is below its wire length is sent as captured (caplen bytes).
 *
 * Pacing: frame j of the whole run is due at start + target(j); a batch takes every frame that is
 * due (at most `batch`), then waits for the next one (sleep when far, spin when close).
 * lt_replay_run() blocks; lt_replay_get_stats() and lt_replay_stop() may be called from another
 * thread (counters are published with relaxed atomics after every batch).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ledgertool.h"
#include "lt_internal.h"
#include "clock.h"

#define MAX_BATCH 256

typedef struct {
    const uint8_t *data;
    uint32_t len;
    int64_t ts_ns;
} rframe;

struct lt_replay {
    lt_replay_config cfg;
    lt_reader *reader; /* keeps the file mapped: rframe.data points into it */
    rframe *fr;        /* frames that will be sent */
    size_t nfr, capfr;
    uint64_t skip_large, skip_short, skip_link; /* per loop */
    uint64_t file_frames;
    int fd;
    int ifindex;
    uint32_t mtu;
    int stop;
    lt_replay_stats st;
};

static void publish(lt_replay *p, const lt_replay_stats *s) {
    uint64_t *dst = (uint64_t *)&p->st;
    const uint64_t *src = (const uint64_t *)s;
    for (size_t i = 0; i < offsetof(lt_replay_stats, stopped) / sizeof(uint64_t); i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    __atomic_store_n(&p->st.stopped, s->stopped, __ATOMIC_RELAXED);
}

void lt_replay_get_stats(const lt_replay *p, lt_replay_stats *out) {
    uint64_t *dst = (uint64_t *)out;
    const uint64_t *src = (const uint64_t *)&p->st;
    for (size_t i = 0; i < offsetof(lt_replay_stats, stopped) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    out->stopped = __atomic_load_n(&p->st.stopped, __ATOMIC_RELAXED);
}

void lt_replay_stop(lt_replay *p) { __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED); }

void lt_replay_close(lt_replay *p) {
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    if (p->reader) lt_reader_close(p->reader);
    free(p->fr);
    free(p);
}

int lt_replay_open(const lt_replay_config *cfg, lt_replay **out, char *err, size_t errlen) {
    *out = NULL;
    if (!cfg || !cfg->path || !cfg->ifname || !cfg->ifname[0] || strlen(cfg->ifname) >= IFNAMSIZ) {
        lt_errf(err, errlen, "replay: missing file or interface name");
        return LT_ERR_ARG;
    }
    if (cfg->mode < LT_REPLAY_TIMING || cfg->mode > LT_REPLAY_TOPSPEED ||
        ((cfg->mode == LT_REPLAY_PPS || cfg->mode == LT_REPLAY_MBPS) && !(cfg->rate > 0))) {
        lt_errf(err, errlen, "replay: bad mode %d or rate %g", cfg->mode, cfg->rate);
        return LT_ERR_ARG;
    }
    lt_replay *p = calloc(1, sizeof *p);
    if (!p) return LT_ERR_NOMEM;
    p->cfg = *cfg;
    p->fd = -1;
    if (!p->cfg.loops) p->cfg.loops = 1;
    if (p->cfg.batch > MAX_BATCH) p->cfg.batch = MAX_BATCH;

    p->ifindex = (int)if_nametoindex(cfg->ifname);
    if (!p->ifindex) {
        lt_errf(err, errlen, "%s: no such interface (%s)", cfg->ifname, strerror(errno));
        lt_replay_close(p);
        return LT_ERR_ARG;
    }
    p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); /* protocol 0: transmit only */
    if (p->fd < 0) {
        lt_errf(err, errlen, "%s: socket(AF_PACKET): %s%s", cfg->ifname, strerror(errno),
                errno == EPERM ? " (needs root or CAP_NET_RAW)" : "");
        lt_replay_close(p);
        return LT_ERR_IO;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, cfg->ifname, strlen(cfg->ifname));
    if (ioctl(p->fd, SIOCGIFMTU, &ifr) != 0) {
        lt_errf(err, errlen, "%s: SIOCGIFMTU: %s", cfg->ifname, strerror(errno));
        lt_replay_close(p);
        return LT_ERR_IO;
    }
    p->mtu = (uint32_t)ifr.ifr_mtu;
    struct sockaddr_ll ll;
    memset(&ll, 0, sizeof ll);
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = 0;
    ll.sll_ifindex = p->ifindex;
    if (bind(p->fd, (struct sockaddr *)&ll, sizeof ll) != 0) {
        lt_errf(err, errlen, "%s: bind: %s", cfg->ifname, strerror(errno));
        lt_replay_close(p);
        return LT_ERR_IO;
    }

    int st = lt_reader_open(cfg->path, &p->reader, err, errlen);
    if (st != LT_OK) {
        lt_replay_close(p);
        return st;
    }
    lt_frame batch[256];
    size_t n;
    for (;;) {
        st = lt_reader_next(p->reader, batch, 256, &n);
        for (size_t i = 0; i < n; i++) {
            const lt_frame *f = &batch[i];
            p->file_frames++;
            if (f->linktype != 1) {
                p->skip_link++;
                continue;
            }
            if (f->caplen < ETH_HLEN) {
                p->skip_short++;
                continue;
            }
            uint16_t et = lt_load_be16(f->data + 12);
            uint32_t max = p->mtu + ETH_HLEN + ((et == ETH_P_8021Q || et == ETH_P_8021AD) ? 4 : 0);
            if (f->caplen > max) {
                p->skip_large++;
                continue;
            }
            if (p->nfr == p->capfr) {
                size_t c = p->capfr ? p->capfr * 2 : 1024;
                rframe *nf = c <= SIZE_MAX / sizeof *nf ? realloc(p->fr, c * sizeof *nf) : NULL;
                if (!nf) {
                    lt_replay_close(p);
                    return LT_ERR_NOMEM;
                }
                p->fr = nf;
                p->capfr = c;
            }
            int64_t d;
            if (p->cfg.mode == LT_REPLAY_TIMING && p->nfr && __builtin_sub_overflow(f->ts_ns, p->fr[0].ts_ns, &d)) {
                /* saturated or garbage timestamps: the gap does not fit the ns clock --timing paces by */
                lt_errf(err, errlen, "%s: frame %llu (byte %llu) is more than 2^63 ns from the first frame sent; "
                        "its timing cannot be kept: replay with --pps, --mbps or --topspeed", cfg->path,
                        (unsigned long long)p->file_frames - 1, (unsigned long long)f->offset);
                lt_replay_close(p);
                return LT_ERR_ARG;
            }
            p->fr[p->nfr++] = (rframe){f->data, f->caplen, f->ts_ns};
        }
        if (st == LT_EOF) break;
        if (st != LT_OK) {
            lt_reader_info info;
            lt_reader_get_info(p->reader, &info);
            lt_errf(err, errlen, "%s: %s", cfg->path, info.message);
            lt_replay_close(p);
            return st;
        }
    }
    p->st.frames_in_file = p->file_frames;
    *out = p;
    return LT_OK;
}

/* Schedule arithmetic saturates at INT64_MAX ns (292 years: "never", until lt_replay_stop): a tiny
 * rate, a long capture times many loops, or a timestamp near the int64 limits must not overflow. */
static int64_t ns_of(double ns) { return ns < 0x1p63 ? (int64_t)ns : INT64_MAX; }
static int64_t sat_add(int64_t a, int64_t b) { /* a, b >= 0 */
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* ns after the start at which frame `i` of loop `loop` is due (the running totals describe the
 * frames before it). Timing mode: lt_replay_open checked that every frame's offset from frame 0
 * fits an int64. */
static int64_t due_ns(const lt_replay *p, uint64_t sent_before, uint64_t bytes_before, uint32_t loop, size_t i,
                      int64_t span) {
    switch (p->cfg.mode) {
    case LT_REPLAY_PPS:
        return ns_of((double)sent_before * 1e9 / p->cfg.rate);
    case LT_REPLAY_MBPS:
        return ns_of((double)bytes_before * 8000.0 / p->cfg.rate);
    case LT_REPLAY_TIMING: {
        int64_t d = p->fr[i].ts_ns - p->fr[0].ts_ns, loops;
        if (d < 0) d = 0;
        if (__builtin_mul_overflow((int64_t)loop, span, &loops)) return INT64_MAX;
        return sat_add(loops, d);
    }
    default:
        return 0;
    }
}

static void wait_until(lt_replay *p, int64_t t0, int64_t due) {
    for (;;) {
        int64_t now = lt_mono_ns() - t0;
        int64_t left = due - now;
        if (left <= 0 || __atomic_load_n(&p->stop, __ATOMIC_RELAXED)) return;
        if (left > 200000) { /* sleep in slices of at most 10 ms so a stop is seen */
            int64_t s = left - 100000;
            if (s > 10000000) s = 10000000;
            struct timespec ts = {0, (long)s};
            nanosleep(&ts, NULL);
        }
    }
}

int lt_replay_run(lt_replay *p, char *err, size_t errlen) {
    lt_replay_stats s = p->st;
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    uint32_t batch = p->cfg.batch;
    if (!batch) {
        if (p->cfg.mode == LT_REPLAY_PPS)
            batch = p->cfg.rate >= 640000 ? 64 : p->cfg.rate / 10000 < 1 ? 1 : (uint32_t)(p->cfg.rate / 10000);
        else if (p->cfg.mode == LT_REPLAY_MBPS)
            batch = p->cfg.rate >= 5000 ? 64 : p->cfg.rate / 80 < 1 ? 1 : (uint32_t)(p->cfg.rate / 80);
        else
            batch = 64;
    }
    int64_t span = 0;
    if (p->cfg.mode == LT_REPLAY_TIMING && p->nfr > 1) {
        span = p->fr[p->nfr - 1].ts_ns - p->fr[0].ts_ns; /* fits: checked at open */
        if (span < 0) span = 0;
        span = sat_add(span, span / (int64_t)(p->nfr - 1)); /* one mean gap before the next loop */
    }
    int rc = LT_OK;
    int64_t t0 = lt_mono_ns();
    uint32_t loop = 0;
    size_t i = 0;      /* next frame of the file to queue */
    size_t pending = 0; /* queued in msgs[0..pending) but not yet sent */
    uint64_t queued_frames = 0, queued_bytes = 0; /* totals including the queued ones */
    /* frames the kernel would refuse are counted once per loop, up front */
    s.skipped_too_large = p->skip_large * p->cfg.loops;
    s.skipped_too_short = p->skip_short * p->cfg.loops;
    s.skipped_linktype = p->skip_link * p->cfg.loops;
    while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) {
        /* queue every due frame, up to a batch */
        while (pending < batch && loop < p->cfg.loops && p->nfr) {
            int64_t due = due_ns(p, queued_frames, queued_bytes, loop, i, span);
            if (pending == 0) wait_until(p, t0, due);
            else if (due > lt_mono_ns() - t0) break;
            iov[pending].iov_base = (void *)p->fr[i].data;
            iov[pending].iov_len = p->fr[i].len;
            pending++;
            queued_frames++;
            queued_bytes += p->fr[i].len;
            if (++i == p->nfr) {
                i = 0;
                loop++;
            }
        }
        if (pending == 0) break;
        if (__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) break;
        for (size_t k = 0; k < pending; k++) {
            memset(&msgs[k], 0, sizeof msgs[k]);
            msgs[k].msg_hdr.msg_iov = &iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
        }
        int r = sendmmsg(p->fd, msgs, (unsigned)pending, 0);
        if (r < 0) {
            if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
                s.retries++;
                sched_yield();
                continue;
            }
            if (errno == EMSGSIZE || errno == EINVAL) { /* this frame only: count it, go on */
                s.send_errors++;
                r = 1;
            } else if (errno == ENETDOWN || errno == ENXIO || errno == ENODEV) {
                lt_errf(err, errlen, "%s: send: %s", p->cfg.ifname, strerror(errno));
                rc = LT_ERR_IO;
                break;
            } else {
                lt_errf(err, errlen, "%s: sendmmsg: %s", p->cfg.ifname, strerror(errno));
                rc = LT_ERR_IO;
                break;
            }
        } else {
            for (int k = 0; k < r; k++) {
                s.frames_sent++;
                s.bytes_sent += iov[k].iov_len;
            }
        }
        memmove(iov, iov + r, (pending - (size_t)r) * sizeof iov[0]);
        pending -= (size_t)r;
        s.elapsed_ns = (uint64_t)(lt_mono_ns() - t0);
        publish(p, &s);
    }
    s.stopped = __atomic_load_n(&p->stop, __ATOMIC_RELAXED) && (pending || loop < p->cfg.loops);
    s.elapsed_ns = (uint64_t)(lt_mono_ns() - t0);
    publish(p, &s);
    return rc;
}
