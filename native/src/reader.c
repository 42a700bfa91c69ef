/*
 * Capture-file reader: the probe table of formats (classic pcap: reader_pcap.c; pcapng:
 * reader_pcapng.c; ERF: reader_erf.c), the read-only map of the file and its SIGBUS guard, and
 * the plug-in point of
 * the other frame sources (workload generator, live interfaces). Every lt_frame.data of a file
 * points into the map (zero copy); lt_reader_next() fills a caller array and allocates nothing
 * per frame.
 *
 * ---------------------------------------------------------------------------------------------
 * POLICIES (docs: ledger-format.md "Capture-file reader policies"; facts: shared/corpus/README.md); what each
 * format accepts, and when its records are truncated or corrupt: the top of its file.
 *
 * Format detection: pcap and pcapng by the first 4 bytes (their magic numbers); then ERF, which
 *   has none, by the plausibility of its first two record headers (reader_erf.c). 0 bytes ->
 *   LT_ERR_FORMAT ("empty file"); 1..3 bytes or an unknown magic -> LT_ERR_FORMAT. A known
 *   magic whose file header is cut
 *   short (pcap < 24 bytes, pcapng SHB cut or malformed) -> LT_ERR_CORRUPT at open.
 *
 * How reading ends (truncated vs corrupt):
 *   Truncated (LT_EOF, info.truncated = 1, every whole record delivered) when the file ends
 *   inside a record whose header is plausible.
 *   Corrupt (LT_ERR_CORRUPT, info.error_offset = offset of the bad header/block, after every
 *   earlier frame was handed out) when a header is inconsistent, whatever follows it.
 *   A record's "wire length" is never checked (it is what the sender claims; 262144 and 0 occur).
 * ---------------------------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledgertool.h"
#include "reader_format.h"

/* ------------------------------------------------------------------ a file that shrinks */

/* The reader maps the capture. When another program truncates the file while it is read (a
 * capture being rotated, an attacker with the storage), a read of a page past the new end raises
 * SIGBUS, which killed `recompute` and `capture`. Checking fstat before each batch cannot close
 * that race: the file can shrink mid-batch, while a worker thread hashes a frame of it; and
 * MAP_POPULATE does not help, truncation drops the pages from every mapping. So each access to a
 * map runs under a guard: a thread-local record of the map and a sigjmp_buf, and a process-wide
 * SIGBUS handler that jumps back when the fault address lies inside the guarded map. Guarded code
 * takes no lock and allocates nothing while it reads the map (malloc, stdio and the pool's mutex
 * are never entered with a frame's bytes being read), so leaving it by siglongjmp leaves no state
 * half-changed; the reader then fails with LT_ERR_IO naming the byte offset. Every other SIGBUS
 * (another mapping, kill -BUS) goes to the handler installed before ours, or the default action. */
static __thread lt_bus_guard *bus_guard;
static struct sigaction bus_prev;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    const uint8_t *a = si->si_addr;
    for (lt_bus_guard *g = bus_guard; g && si->si_code > 0; g = g->outer) /* > 0: a fault, not kill(2) */
        if (g->len && a >= g->lo && a < g->lo + g->len) {
            g->fault = (size_t)(a - g->lo);
            bus_guard = g->outer;
            siglongjmp(g->jb, 1);
        }
    if (bus_prev.sa_flags & SA_SIGINFO) {
        bus_prev.sa_sigaction(sig, si, ctx);
    } else if (bus_prev.sa_handler != SIG_DFL && bus_prev.sa_handler != SIG_IGN) {
        bus_prev.sa_handler(sig);
    } else {
        /* the default action: a fault repeats when we return, a kill(2) has to be sent again */
        signal(SIGBUS, SIG_DFL);
        if (si->si_code <= 0) raise(SIGBUS);
    }
}

static void bus_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER; /* NODEFER: siglongjmp leaves SIGBUS unblocked */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &bus_prev);
}

void lt_bus_guard_push(lt_bus_guard *g, const lt_reader *r) {
    g->lo = r->ops ? NULL : r->map;
    g->len = r->ops ? 0 : r->size;
    g->fault = 0;
    g->outer = bus_guard;
    bus_guard = g;
}

void lt_bus_guard_pop(lt_bus_guard *g) { bus_guard = g->outer; }

void lt_reader_fail_shrunk(lt_reader *r, uint64_t off) {
    /* a page the disk cannot read (EIO) faults the same way: reading that byte tells them apart */
    uint8_t b;
    if (r->map && !r->stream && !r->ops && pread(r->fd, &b, 1, (off_t)off) < 0) {
        set_error(r, LT_ERR_IO, off,
                  "cannot read byte %llu: %s; the storage reported an I/O error: check the device "
                  "(dmesg)",
                  (unsigned long long)off, strerror(errno));
        return;
    }
    set_error(r, LT_ERR_IO, off,
              "the file shrank while it was read: byte %llu of %zu is gone (truncated by another program?)",
              (unsigned long long)off, r->size);
}

/* ------------------------------------------------------------------ public API */

/* The capture formats, probed in order by the file's first bytes: ERF, which has no magic number,
 * last. */
static const lt_format *const formats[] = {&lt_format_pcapng, &lt_format_pcap, &lt_format_erf};

/* Open, stat and map `path` read-only; *size its length (>= 4), *fdp the file, kept open to tell a
 * failed read from a cut (lt_reader_fail_shrunk). LT_OK, or an LT_ERR_* (message in err). */
static int map_file(const char *path, const uint8_t **map, size_t *size, int *fdp, char *err,
                    size_t errlen) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; the file
     * is only mmap'd, which the flag does not affect. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        lt_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return LT_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        lt_errf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return LT_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)" : S_ISSOCK(st.st_mode) ? "a socket"
                         : S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ? "a block device"
                         : S_ISDIR(st.st_mode) ? "a directory" : "not a regular file";
        lt_errf(err, errlen, "%s: is %s, not a capture file; save the capture to a regular file first", path,
                kind);
        close(fd);
        return LT_ERR_IO;
    }
    *size = (size_t)st.st_size;
    if (*size < 4) {
        close(fd);
        if (*size == 0)
            lt_errf(err, errlen, "%s: empty file (0 bytes), not a pcap or pcapng capture", path);
        else
            lt_errf(err, errlen, "%s: %zu-byte file is too short to be a pcap or pcapng capture", path, *size);
        return LT_ERR_FORMAT;
    }
    pthread_once(&bus_once, bus_install);
    void *m = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        int saved = errno;
        close(fd);
        lt_errf(err, errlen, "%s: cannot mmap: %s", path, strerror(saved));
        return LT_ERR_IO;
    }
    (void)madvise(m, *size, MADV_SEQUENTIAL);
    *map = m;
    *fdp = fd;
    return LT_OK;
}

int lt_reader_open(const char *path, lt_reader **out, char *err, size_t errlen) {
    *out = NULL;
    if (err && errlen) err[0] = 0;
    const uint8_t *map;
    size_t size;
    int fd;
    int st = map_file(path, &map, &size, &fd, err, errlen);
    if (st != LT_OK) return st;
    lt_reader *r = calloc(1, sizeof *r);
    if (!r) {
        munmap((void *)map, size);
        close(fd);
        lt_errf(err, errlen, "%s: out of memory", path);
        return LT_ERR_NOMEM;
    }
    r->map = map;
    r->fd = fd;
    r->size = size;
    r->info.file_size = size;
    /* the header is read from the map too: guarded (a file cut or a page the disk cannot read) */
    lt_bus_guard g;
    lt_bus_guard_push(&g, r);
    if (sigsetjmp(g.jb, 0)) {
        lt_reader_fail_shrunk(r, g.fault);
        lt_errf(err, errlen, "%s: %s", path, r->info.message);
        lt_reader_close(r);
        return LT_ERR_IO;
    }
    uint32_t magic = lt_load_le32(map);
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (!formats[i]->probe(map, size < LT_PROBE_BYTES ? size : LT_PROBE_BYTES)) continue;
        r->fmt = formats[i];
        st = r->fmt->open(r);
        lt_bus_guard_pop(&g);
        if (st == LT_OK) {
            *out = r;
            return LT_OK;
        }
        lt_errf(err, errlen, "%s: %s", path, r->info.message);
        lt_reader_close(r);
        return st;
    }
    lt_bus_guard_pop(&g);
    lt_errf(err, errlen,
            "%s: not a pcap, pcapng or ERF capture (unknown magic %02x %02x %02x %02x)", path,
            magic & 0xff, magic >> 8 & 0xff, magic >> 16 & 0xff, magic >> 24);
    lt_reader_close(r);
    return LT_ERR_FORMAT;
}

/* ------------------------------------------------------------------ a stream (lt_reader_open_fd) */

/* A pipe or standard input cannot be mapped: the reader keeps a window of the stream in a heap
 * buffer and runs the same format parsers over it. Frames handed out point into the window and
 * stay valid until the next lt_reader_next (a non-stable source: the engine reads no batch ahead);
 * each call first drops the bytes the parsers consumed, then reads what the stream has ready, up to
 * LT_STREAM_WINDOW bytes, waiting only when the window holds no whole record (so frames of a slow
 * pipe, `tcpdump -w - | ...`, are handed out as they come). A parser verdict that depends on where the window
 * ends (a record cut by it, or pcap's caplen past the end) is taken back while the stream goes
 * on: the frames before it are handed out, or, with none, the window grows (doubling) until the
 * record fits or the stream ends. The parsers refuse any record over 256 MiB (LT_MAX_CAPLEN,
 * LT_MAX_BLOCK) whatever follows, so the window never exceeds that plus one read. A quiet stream
 * is waited on LT_STREAM_WAIT_MS at a time: lt_reader_next then returns LT_OK with no frame (as a
 * live source does), so that the caller can act on --duration or a signal. */
#define LT_STREAM_WINDOW (4u << 20)

/* How long one lt_reader_next waits on a quiet stream before it returns LT_OK with no frame, so
 * that its caller can act on a deadline or a signal (a writer may stay silent for hours). */
#define LT_STREAM_WAIT_MS 100

/* Read until map holds `want` bytes, the stream ends, or (block == 0, or after one read) nothing
 * more is ready; a blocking fill waits LT_STREAM_WAIT_MS at most, or until a signal, and then sets
 * *idle. LT_OK, or LT_ERR_NOMEM / LT_ERR_IO (set). */
static int stream_fill(lt_reader *r, size_t want, int block, int *idle) {
    if (want > r->cap) {
        size_t cap = r->cap * 2 > want ? r->cap * 2 : want;
        uint8_t *b = realloc((void *)r->map, cap);
        if (!b) return set_error(r, LT_ERR_NOMEM, r->size, "out of memory for a %zu-byte read window", cap);
        r->map = b;
        r->cap = cap;
    }
    while (r->size < want && !r->stream_eof) {
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        if (poll(&pfd, 1, block ? LT_STREAM_WAIT_MS : 0) != 1) { /* (EINTR: as not ready) */
            if (block) *idle = 1;
            break;
        }
        ssize_t got = read(r->fd, (uint8_t *)r->map + r->size, r->cap - r->size);
        if (got > 0) {
            r->size += (size_t)got;
            r->info.file_size += (uint64_t)got;
            block = 0;
        } else if (got == 0) {
            r->stream_eof = 1;
        } else if (errno != EINTR) {
            return set_error(r, LT_ERR_IO, r->size, "read error at byte %zu: %s", AT(r, r->size), strerror(errno));
        }
    }
    return LT_OK;
}

/* Drop the bytes before pos (their frames were handed out by an earlier call). */
static void stream_slide(lt_reader *r) {
    if (!r->pos) return;
    memmove((uint8_t *)r->map, r->map + r->pos, r->size - r->pos);
    r->base += r->pos;
    r->size -= r->pos;
    r->pos = 0;
}

/* Take back a verdict that more of the stream could change. 1 when it was one. */
static int stream_undo(lt_reader *r) {
    if (r->stream_eof || !r->state || (r->state != LT_EOF && !r->undecided)) return 0;
    r->state = 0;
    r->undecided = 0;
    r->info.truncated = 0;
    r->info.truncated_offset = r->info.truncated_bytes = 0;
    r->info.error = 0;
    r->info.error_offset = 0;
    r->info.message[0] = 0;
    return 1;
}

/* Frames of the stream, or 0 with *idle set when it had nothing more within a wait. */
static size_t stream_next(lt_reader *r, lt_frame *frames, size_t max, int *idle) {
    size_t want = LT_STREAM_WINDOW;
    int block = r->size == r->pos; /* nothing left to parse: wait for the stream */
    for (;;) {
        stream_slide(r);
        if (stream_fill(r, want, block, idle) != LT_OK) return 0;
        if (*idle) return 0; /* nothing came: the parsers would decide nothing new */
        size_t k = r->fmt->next(r, frames, max);
        if (!stream_undo(r) || k) return k;
        /* no frame: the record at pos needs more than the window holds (pos may have passed blocks) */
        block = 1;
        if (r->size - r->pos >= want) want *= 2;
    }
}

int lt_reader_open_fd(int fd, const char *name, const uint8_t *prefix, size_t prefix_len, lt_reader **out, char *err,
                      size_t errlen) {
    *out = NULL;
    if (err && errlen) err[0] = 0;
    lt_reader *r = calloc(1, sizeof *r);
    uint8_t *buf = malloc(LT_STREAM_WINDOW > prefix_len ? LT_STREAM_WINDOW : prefix_len);
    if (!r || !buf) {
        free(r);
        free(buf);
        close(fd);
        lt_errf(err, errlen, "%s: out of memory", name);
        return LT_ERR_NOMEM;
    }
    r->stream = 1;
    r->fd = fd;
    r->map = buf;
    r->cap = LT_STREAM_WINDOW > prefix_len ? LT_STREAM_WINDOW : prefix_len;
    if (prefix_len) memcpy(buf, prefix, prefix_len);
    r->size = r->info.file_size = prefix_len;
    size_t want = LT_STREAM_WINDOW;
    for (;;) {
        int idle = 0; /* (a quiet stream: wait on for its file header) */
        int st = stream_fill(r, want, 1, &idle);
        if (st != LT_OK) {
            lt_errf(err, errlen, "%s: %s", name, r->info.message);
            lt_reader_close(r);
            return st;
        }
        if (r->size < 24 && !r->stream_eof) continue; /* a file header is whole before it is judged */
        if (r->size < 4) {
            if (r->size)
                lt_errf(err, errlen, "%s: %zu-byte stream is too short to be a pcap or pcapng capture", name, r->size);
            else
                lt_errf(err, errlen, "%s: empty input (0 bytes), not a pcap or pcapng capture", name);
            lt_reader_close(r);
            return LT_ERR_FORMAT;
        }
        r->fmt = NULL;
        for (size_t i = 0; i < sizeof formats / sizeof formats[0] && !r->fmt; i++)
            if (formats[i]->probe(r->map, r->size < LT_PROBE_BYTES ? r->size : LT_PROBE_BYTES))
                r->fmt = formats[i];
        if (!r->fmt) {
            lt_errf(err, errlen,
                    "%s: not a pcap, pcapng or ERF capture (unknown magic "
                    "%02x %02x %02x %02x)", name,
                    r->map[0], r->map[1], r->map[2], r->map[3]);
            lt_reader_close(r);
            return LT_ERR_FORMAT;
        }
        st = r->fmt->open(r);
        if (st == LT_OK) {
            *out = r;
            return LT_OK;
        }
        if (r->stream_eof || !r->info.truncated) { /* not a header cut by the window */
            lt_errf(err, errlen, "%s: %s", name, r->info.message);
            lt_reader_close(r);
            return st;
        }
        r->state = 0;
        r->info.truncated = 0;
        if (r->size >= want) want *= 2;
    }
}

/* The page tables of the next stretch of a mapped file are filled in one call (MADV_POPULATE_READ,
 * Linux 5.14) ahead of the frames read: ~10 % of a 64-byte frame's cost went to a page fault every
 * few pages. A window at a time, not the whole file, so a capture larger than memory is not read
 * in before its first frame; an error (an older kernel, a file cut short) only leaves the faults. */
#define POPULATE_WINDOW ((size_t)16 << 20)
static void populate_ahead(lt_reader *r) {
#ifdef MADV_POPULATE_READ
    if (r->pos + POPULATE_WINDOW / 2 < r->populated || r->populated >= r->size) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t from = r->populated > r->pos ? r->populated : r->pos;
    from -= from % page;
    size_t to = from + POPULATE_WINDOW < r->size ? from + POPULATE_WINDOW : r->size;
    (void)madvise((void *)(r->map + from), to - from, MADV_POPULATE_READ);
    r->populated = to;
#else
    (void)r;
#endif
}

/* A mapped file's next frames, the map guarded against the file shrinking. */
static int file_next(lt_reader *r, lt_frame *frames, size_t max, size_t *n) {
    populate_ahead(r);
    lt_bus_guard g;
    lt_bus_guard_push(&g, r);
    if (sigsetjmp(g.jb, 0)) { /* the file shrank: none of this call's frames is handed out */
        lt_reader_fail_shrunk(r, g.fault);
        return LT_ERR_IO;
    }
    size_t k = r->fmt->next(r, frames, max);
    lt_bus_guard_pop(&g);
    r->info.frames += k;
    *n = k;
    if (k) return LT_OK;
    return r->state ? r->state : LT_EOF;
}

int lt_reader_next(lt_reader *r, lt_frame *frames, size_t max, size_t *n) {
    *n = 0;
    if (r->state) return r->state;
    if (!frames || max == 0) return LT_ERR_ARG;
    if (r->stream) {
        int idle = 0;
        size_t k = stream_next(r, frames, max, &idle);
        r->info.frames += k;
        *n = k;
        if (k || (idle && !r->state)) return LT_OK;
        return r->state ? r->state : LT_EOF;
    }
    if (r->ops) {
        int st = r->ops->next(r->src, frames, max, n, &r->info);
        r->info.frames += *n;
        if (st != LT_OK && *n == 0) r->state = st;
        return *n ? LT_OK : st;
    }
    return file_next(r, frames, max, n);
}

int lt_reader_next_before(lt_reader *r, lt_frame *frames, size_t max, uint64_t before, size_t *n, int *paused) {
    *n = 0;
    *paused = 0;
    if (r->fmt != &lt_format_pcapng || r->stream || r->ops) return LT_ERR_ARG;
    if (r->state) return r->state;
    if (!frames || max == 0) return LT_ERR_ARG;
    r->pausing = 1;
    r->pause_before = before;
    r->paused = 0;
    int st = file_next(r, frames, max, n);
    r->pausing = 0;
    *paused = r->paused;
    return *paused && st == LT_EOF ? LT_OK : st; /* paused before any frame: LT_OK, *n == 0 */
}

static void copy_frames(const lt_frame *frames, size_t n, uint8_t *dst) {
    for (size_t i = 0; i < n; i++) {
        if (frames[i].caplen) memcpy(dst, frames[i].data, frames[i].caplen);
        dst += frames[i].caplen;
    }
}

int lt_reader_copy_frames(lt_reader *r, const lt_frame *frames, size_t n, uint8_t *dst, size_t dst_len) {
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        if (__builtin_add_overflow(need, (size_t)frames[i].caplen, &need)) return LT_ERR_ARG;
    if (need > dst_len || (need && !dst)) return LT_ERR_ARG;
    /* volatile copies: nothing that lives in a register is read after the setjmp */
    const lt_frame *volatile src = frames;
    uint8_t *volatile to = dst;
    volatile size_t count = n;
    lt_bus_guard g;
    lt_bus_guard_push(&g, r);
    if (sigsetjmp(g.jb, 0)) {
        lt_reader_fail_shrunk(r, g.fault);
        return LT_ERR_IO;
    }
    copy_frames(src, count, to);
    lt_bus_guard_pop(&g);
    return LT_OK;
}

int lt_reader_declare_losses(lt_reader *r, int on) {
    if (!r) return LT_ERR_ARG;
    r->erf_losses = on != 0;
    return LT_OK;
}

void lt_reader_get_info(const lt_reader *r, lt_reader_info *info) {
    *info = r->info;
}

lt_reader *lt_reader_from_source(const lt_source_ops *ops, void *src, int format) {
    lt_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->ops = ops;
    r->src = src;
    r->info.format = format;
    return r;
}

int lt_reader_frames_stable(const lt_reader *r) {
    /* a file: frames point into the map, valid until the reader is closed; a stream's window moves */
    return r->ops == NULL && !r->stream;
}

void *lt_reader_source(const lt_reader *r, const lt_source_ops *ops) {
    return r && r->ops == ops ? r->src : NULL;
}

void lt_reader_close(lt_reader *r) {
    if (!r) return;
    if (r->ops && r->ops->close) r->ops->close(r->src);
    if (r->stream) {
        free((void *)r->map);
        close(r->fd);
    } else if (r->map) { /* a file (lt_reader_open) */
        munmap((void *)r->map, r->size);
        close(r->fd);
    }
    free(r->ifs);
    free(r);
}
