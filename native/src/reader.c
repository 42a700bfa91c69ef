/*
 * Capture-file reader: classic pcap (µs / ns / "modified" Kuznetzov, either byte order) and
 * pcapng. The file is mmap'd read-only and every lt_frame.data points into the map (zero copy);
 * lt_reader_next() fills a caller array and allocates nothing per frame.
 *
 * ---------------------------------------------------------------------------------------------
 * POLICIES (docs: LEDGER-FORMAT.md "Reader policies"; facts: shared/corpus/README.md)
 *
 * Format detection: by the first 4 bytes only. 0 bytes -> LT_ERR_FORMAT ("empty file");
 *   1..3 bytes or an unknown magic -> LT_ERR_FORMAT. A known magic whose file header is cut
 *   short (pcap < 24 bytes, pcapng SHB cut or malformed) -> LT_ERR_CORRUPT at open.
 *
 * Versions:
 *   pcap: major 2 is accepted with any minor (2.4 is normal, 2.1 and 2.5 occur in the wild and
 *     are read like 2.4, as wiretap does); any other major -> LT_ERR_FORMAT at open (libpcap and
 *     wiretap both reject 1.x).
 *   pcapng: SHB 1.0 is accepted, and 1.2 (written by some old tools; libpcap accepts it too).
 *     Anything else (0.1, 1.1, 2.0, ...) -> LT_ERR_FORMAT at the SHB's offset: at open for the
 *     first section, otherwise from lt_reader_next() after every frame before it was handed
 *     out (this is what wiretap and libpcap do; we do not guess at skipping the section).
 *
 * Link type: the pcap header field is masked to its lower 16 bits (bits 16-31 are reserved /
 *   FCS information). Every link type is read; none is rejected.
 *
 * Lengths:
 *   pcap caplen > file snaplen (snaplen != 0): the full caplen is delivered and the frame gets
 *   LT_RF_CAPLEN_GT_SNAPLEN (wiretap's view; libpcap would cut to snaplen). caplen > wire len:
 *   delivered, LT_RF_CAPLEN_GT_WIRELEN. caplen 0 is a valid empty frame.
 *
 * How reading ends (truncated vs corrupt):
 *   Truncated (LT_EOF, info.truncated = 1, every whole record delivered) when the file ends
 *   inside a record whose header is plausible:
 *     - pcap: fewer than 16 (24 for the modified format) header bytes left; or a header whose
 *       caplen runs past EOF but is <= max(file snaplen, 262144) (a plausible packet cut by the
 *       end of the file).
 *     - pcapng: fewer than 8 block-header bytes left (12 for an SHB); or a block whose length
 *       passes the structural checks below but runs past EOF.
 *   Corrupt (LT_ERR_CORRUPT, info.error_offset = offset of the bad header/block, after every
 *   earlier frame was handed out):
 *     - pcap: caplen > LT_MAX_CAPLEN (256 MiB), whatever follows; or caplen runs past EOF and is
 *       also > max(snaplen, 262144): that header is garbage, not a cut packet (the corpus'
 *       sv__bug-1450-04, sv__smtp-to-comma, sv__bug-6875-01_fuzz, derived__huge_caplen,
 *       derived__cat_two_pcaps, all of which wiretap/libpcap also call corrupt).
 *     - pcapng: block length < 12, not a multiple of 4 (even if a reader could guess the pad,
 *       e.g. pythonpcapng__test006.ntar, which wiretap tolerates), > LT_MAX_BLOCK (256 MiB),
 *       trailer length != header length, shorter than its block type's fixed part, a packet
 *       length that overruns its block, an IDB option that overruns its block, a packet on an
 *       interface the section has not defined, an SHB with a bad byte-order magic, or more than
 *       LT_MAX_IFACES interfaces in one section.
 *   A record's "wire length" is never checked (it is what the sender claims; 262144 and 0 occur).
 *
 * Timestamps -> int64 ns since the epoch:
 *   pcap: (u32)sec * 1e9 + (u32)fraction * (1000 | 1); a fraction out of range is NOT rejected.
 *   pcapng: 64-bit count in the interface's if_tsresol unit (decimal 10^-n, binary 2^-n when the
 *   high bit is set; default 10^-6), converted with 128-bit arithmetic (binary: floor), plus
 *   if_tsoffset seconds; a value outside int64 saturates. SPB: ts 0 + LT_RF_NO_TIMESTAMP.
 *   Interface ids and tsresol are per section; each section has its own byte order.
 *
 * pcapng blocks: SHB, IDB, EPB, SPB (caplen = min(wire len, interface 0 snaplen unless 0,
 *   bytes in block)), obsolete PB (type 2) are interpreted; every other block type (NRB, ISB,
 *   DSB, custom, unknown) is checked structurally and skipped (info.skipped_blocks).
 * ---------------------------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledgertool.h"
#include "lt_internal.h"

#define LT_MAX_CAPLEN (256u << 20)      /* pcap: a caplen above this is corrupt, always */
#define LT_PLAUSIBLE_CAPLEN 262144u     /* pcap: floor of "plausible cut packet" (with snaplen) */
#define LT_MAX_BLOCK (256u << 20)       /* pcapng: a block above this is corrupt, always */
#define LT_MAX_IFACES (1u << 20)        /* pcapng: interfaces per section */

#define PCAPNG_SHB 0x0A0D0D0Au
#define PCAPNG_IDB 1u
#define PCAPNG_PB 2u
#define PCAPNG_SPB 3u
#define PCAPNG_EPB 6u

typedef struct {
    uint32_t linktype;
    uint32_t snaplen;
    int tsres_binary;   /* 0: unit 10^-exp s, 1: unit 2^-exp s */
    uint32_t tsres_exp;
    int64_t tsoffset;   /* seconds */
} lt_iface;

struct lt_reader {
    const uint8_t *map;
    size_t size;
    size_t pos;          /* next record/block to read */
    int be;              /* pcap file / current pcapng section is big-endian */
    int state;           /* 0 while reading; LT_EOF or an LT_ERR_* once done */
    /* pcap */
    size_t rec_hdr;      /* 16, or 24 for the modified format */
    uint32_t frac_unit;  /* ns per fraction unit: 1000 or 1 */
    uint32_t snaplen;
    uint32_t linktype;
    uint32_t plausible;  /* max(min(snaplen, LT_MAX_CAPLEN), LT_PLAUSIBLE_CAPLEN) */
    /* pcapng */
    uint32_t section;    /* 0-based index of the current section */
    int have_first_if;
    lt_iface *ifs;
    uint32_t nifs, cap_ifs;
    lt_reader_info info;
    /* Other frame sources (workload generator, live interfaces) plug in here; NULL for files. */
    const lt_source_ops *ops;
    void *src;
};

static inline uint16_t rd16(const lt_reader *r, const uint8_t *p) {
    return r->be ? lt_load_be16(p) : lt_load_le16(p);
}
static inline uint32_t rd32(const lt_reader *r, const uint8_t *p) {
    return r->be ? lt_load_be32(p) : lt_load_le32(p);
}

static void set_truncated(lt_reader *r, uint64_t off, uint64_t have, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_truncated(lt_reader *r, uint64_t off, uint64_t have, const char *fmt, ...) {
    r->state = LT_EOF;
    r->info.truncated = 1;
    r->info.truncated_offset = off;
    r->info.truncated_bytes = have;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->info.message, sizeof r->info.message, fmt, ap);
    va_end(ap);
}

static int set_error(lt_reader *r, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int set_error(lt_reader *r, int code, uint64_t off, const char *fmt, ...) {
    r->state = code;
    r->info.error = code;
    r->info.error_offset = off;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->info.message, sizeof r->info.message, fmt, ap);
    va_end(ap);
    return code;
}

/* ------------------------------------------------------------------ classic pcap */

/* The record loop, specialised on the file's byte order. The reader's fields live in locals for
 * the whole call: the frame stores below could otherwise alias them (they would be reloaded and
 * r->pos stored back for every frame). Errors and the end go through the (cold) helpers. */
static inline __attribute__((always_inline)) size_t pcap_next_bo(lt_reader *r, lt_frame *out, size_t max,
                                                                 const int be) {
    size_t k = 0;
    const size_t hl = r->rec_hdr, size = r->size;
    const uint8_t *const map = r->map;
    const uint32_t rf_be = be ? LT_RF_BIG_ENDIAN : 0, snaplen = r->snaplen, linktype = r->linktype;
    const int64_t frac_unit = r->frac_unit;
    size_t pos = r->pos;
#define RD32(p) (be ? lt_load_be32(p) : lt_load_le32(p))
    while (k < max) {
        const size_t rem = size - pos;
        if (rem == 0) {
            r->state = LT_EOF;
            break;
        }
        if (rem < hl) {
            set_truncated(r, pos, rem, "truncated record at byte %zu: %zu of %zu header bytes", pos, rem, hl);
            break;
        }
        const uint8_t *p = map + pos;
        uint32_t sec = RD32(p), frac = RD32(p + 4), caplen = RD32(p + 8), len = RD32(p + 12);
        if (caplen > LT_MAX_CAPLEN) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt record header at byte %zu: caplen %u exceeds the %u-byte limit (%zu bytes left)",
                      pos, caplen, LT_MAX_CAPLEN, rem);
            break;
        }
        if (caplen > rem - hl) {
            if (caplen <= r->plausible)
                set_truncated(r, pos, rem, "truncated record at byte %zu: %zu of %zu bytes (caplen %u)", pos, rem,
                              hl + (size_t)caplen, caplen);
            else
                set_error(r, LT_ERR_CORRUPT, pos,
                          "corrupt record header at byte %zu: caplen %u exceeds both the snaplen %u and the "
                          "%zu bytes left",
                          pos, caplen, snaplen, rem - hl);
            break;
        }
        lt_frame *f = &out[k++];
        f->data = p + hl;
        f->offset = pos;
        f->ts_ns = (int64_t)sec * 1000000000LL + (int64_t)frac * frac_unit;
        f->caplen = caplen;
        f->wire_len = len;
        f->linktype = linktype;
        f->interface_id = 0;
        f->section = 0;
        f->rflags = rf_be | ((snaplen && caplen > snaplen) ? LT_RF_CAPLEN_GT_SNAPLEN : 0) |
                    (caplen > len ? LT_RF_CAPLEN_GT_WIRELEN : 0);
        pos += hl + caplen;
    }
#undef RD32
    r->pos = pos;
    return k;
}

static size_t pcap_next(lt_reader *r, lt_frame *out, size_t max) {
    return r->be ? pcap_next_bo(r, out, max, 1) : pcap_next_bo(r, out, max, 0);
}

/* ------------------------------------------------------------------ pcapng */

static int64_t ts_to_ns(const lt_iface *ifc, uint64_t ts) {
    __int128 ns;
    if (ifc->tsres_binary) {
        unsigned __int128 v = (unsigned __int128)ts * 1000000000u;
        ns = (__int128)(v >> ifc->tsres_exp); /* exp <= 127 */
    } else {
        static const uint64_t p10[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
                                         10000000ull, 100000000ull, 1000000000ull, 10000000000ull,
                                         100000000000ull, 1000000000000ull, 10000000000000ull,
                                         100000000000000ull, 1000000000000000ull, 10000000000000000ull,
                                         100000000000000000ull, 1000000000000000000ull,
                                         10000000000000000000ull};
        uint32_t e = ifc->tsres_exp;
        if (e <= 9)
            ns = (__int128)ts * (__int128)p10[9 - e];
        else if (e - 9 <= 19)
            ns = (__int128)(ts / p10[e - 9]);
        else
            ns = 0;
    }
    ns += (__int128)ifc->tsoffset * 1000000000;
    if (ns > (__int128)INT64_MAX) return INT64_MAX;
    if (ns < (__int128)INT64_MIN) return INT64_MIN;
    return (int64_t)ns;
}

static int add_iface(lt_reader *r, const lt_iface *ifc, size_t pos) {
    if (r->nifs >= LT_MAX_IFACES)
        return set_error(r, LT_ERR_CORRUPT, pos, "corrupt pcapng: more than %u interfaces in section %u at byte %zu",
                         LT_MAX_IFACES, r->section, pos);
    if (r->nifs == r->cap_ifs) {
        uint32_t nc = r->cap_ifs ? r->cap_ifs * 2 : 8;
        lt_iface *n = realloc(r->ifs, (size_t)nc * sizeof *n);
        if (!n) return set_error(r, LT_ERR_NOMEM, pos, "out of memory for pcapng interface at byte %zu", pos);
        r->ifs = n;
        r->cap_ifs = nc;
    }
    r->ifs[r->nifs++] = *ifc;
    r->info.interfaces++;
    if (!r->have_first_if) {
        r->have_first_if = 1;
        r->info.linktype = ifc->linktype;
        r->info.snaplen = ifc->snaplen;
    }
    return LT_OK;
}

/* Parse an IDB body (block minus its 8-byte header and 4-byte trailer). */
static int parse_idb(lt_reader *r, const uint8_t *body, size_t blen, size_t pos) {
    lt_iface ifc = {0};
    ifc.linktype = rd16(r, body);
    ifc.snaplen = rd32(r, body + 4);
    ifc.tsres_exp = 6;
    size_t o = 8;
    while (o + 4 <= blen) {
        uint16_t code = rd16(r, body + o), olen = rd16(r, body + o + 2);
        if (code == 0) break; /* opt_endofopt */
        if ((size_t)olen > blen - o - 4)
            return set_error(r, LT_ERR_CORRUPT, pos,
                             "corrupt pcapng IDB at byte %zu: option %u of length %u overruns the block", pos, code,
                             olen);
        const uint8_t *v = body + o + 4;
        if (code == 9 && olen >= 1) { /* if_tsresol */
            ifc.tsres_binary = (v[0] & 0x80) != 0;
            ifc.tsres_exp = v[0] & 0x7F;
        } else if (code == 14 && olen >= 8) { /* if_tsoffset */
            uint64_t off = r->be ? ((uint64_t)lt_load_be32(v) << 32 | lt_load_be32(v + 4)) : lt_load_le64(v);
            ifc.tsoffset = (int64_t)off;
        }
        o += 4 + (((size_t)olen + 3) & ~(size_t)3);
    }
    return add_iface(r, &ifc, pos);
}

/* Bounded cursor for one block at `pos`: header present, an SHB's byte-order magic (switches
 * r->be), length >= 12, multiple of 4, <= LT_MAX_BLOCK, inside the file, trailer == header.
 * Returns LT_OK (type/length out), LT_EOF (truncated; info set) or an LT_ERR_* (info set). */
static int check_block(lt_reader *r, size_t pos, uint32_t *type_out, uint32_t *blen_out) {
    const size_t rem = r->size - pos;
    const uint8_t *p = r->map + pos;
    if (rem < 8) {
        set_truncated(r, pos, rem, "truncated pcapng block at byte %zu: %zu of 8 header bytes", pos, rem);
        return LT_EOF;
    }
    uint32_t type = lt_load_le32(p); /* the SHB type is a byte palindrome */
    if (type == PCAPNG_SHB) {
        if (rem < 12) {
            set_truncated(r, pos, rem, "truncated pcapng section header at byte %zu: %zu of 12 header bytes", pos,
                          rem);
            return LT_EOF;
        }
        uint32_t bom = lt_load_le32(p + 8);
        if (bom == 0x1A2B3C4Du)
            r->be = 0;
        else if (bom == 0x4D3C2B1Au)
            r->be = 1;
        else
            return set_error(r, LT_ERR_CORRUPT, pos,
                             "corrupt pcapng section header at byte %zu: bad byte-order magic 0x%08x", pos, bom);
    } else {
        type = rd32(r, p);
    }
    uint32_t blen = rd32(r, p + 4);
    if (blen < 12 || (blen & 3))
        return set_error(r, LT_ERR_CORRUPT, pos,
                         "corrupt pcapng block at byte %zu: type 0x%x has length %u (%s)", pos, type, blen,
                         blen < 12 ? "below the 12-byte minimum" : "not a multiple of 4");
    if (blen > LT_MAX_BLOCK)
        return set_error(r, LT_ERR_CORRUPT, pos,
                         "corrupt pcapng block at byte %zu: type 0x%x has length %u, over the %u-byte limit", pos,
                         type, blen, LT_MAX_BLOCK);
    if (blen > rem) {
        set_truncated(r, pos, rem, "truncated pcapng block at byte %zu: %zu of %u bytes (type 0x%x)", pos, rem,
                      blen, type);
        return LT_EOF;
    }
    uint32_t trailer = rd32(r, p + blen - 4);
    if (trailer != blen)
        return set_error(r, LT_ERR_CORRUPT, pos,
                         "corrupt pcapng block at byte %zu: type 0x%x trailer length %u differs from header length %u",
                         pos, type, trailer, blen);
    *type_out = type;
    *blen_out = blen;
    return LT_OK;
}

static int too_short(lt_reader *r, size_t pos, const char *what, uint32_t blen, uint32_t min) {
    return set_error(r, LT_ERR_CORRUPT, pos, "corrupt pcapng %s at byte %zu: block length %u below its minimum %u",
                     what, pos, blen, min);
}

/* Handle the SHB fields after check_block(). */
static int parse_shb(lt_reader *r, size_t pos, uint32_t blen, int first) {
    if (blen < 28) return too_short(r, pos, "section header", blen, 28);
    const uint8_t *p = r->map + pos;
    uint16_t maj = rd16(r, p + 12), min = rd16(r, p + 14);
    if (!(maj == 1 && (min == 0 || min == 2)))
        return set_error(r, LT_ERR_FORMAT, pos, "unsupported pcapng section version %u.%u at byte %zu", maj, min, pos);
    if (first) {
        r->info.version_major = maj;
        r->info.version_minor = min;
    } else {
        r->section++;
    }
    r->info.sections++;
    r->nifs = 0;
    return LT_OK;
}

/* Fill up to `max` frames; stops early only when reading ends (r->state set). */
static size_t pcapng_next(lt_reader *r, lt_frame *out, size_t max) {
    size_t k = 0;
    while (k < max) {
        const size_t pos = r->pos;
        if (pos == r->size) {
            r->state = LT_EOF;
            break;
        }
        uint32_t type, blen;
        if (check_block(r, pos, &type, &blen) != LT_OK) break;
        const uint8_t *body = r->map + pos + 8;
        const size_t bl = blen - 12; /* body length */
        const uint32_t rf_be = r->be ? LT_RF_BIG_ENDIAN : 0;
        lt_frame *f = &out[k];
        const lt_iface *ifc;
        uint32_t ifid, caplen, len;
        uint64_t ts;
        size_t hdr;
        switch (type) {
        case PCAPNG_SHB:
            if (parse_shb(r, pos, blen, 0) != LT_OK) return k;
            goto next_block;
        case PCAPNG_IDB:
            if (blen < 20) { too_short(r, pos, "interface description", blen, 20); return k; }
            if (parse_idb(r, body, bl, pos) != LT_OK) return k;
            goto next_block;
        case PCAPNG_EPB:
            if (blen < 32) { too_short(r, pos, "enhanced packet block", blen, 32); return k; }
            ifid = rd32(r, body);
            ts = ((uint64_t)rd32(r, body + 4) << 32) | rd32(r, body + 8);
            caplen = rd32(r, body + 12);
            len = rd32(r, body + 16);
            hdr = 20;
            break;
        case PCAPNG_PB:
            if (blen < 32) { too_short(r, pos, "packet block", blen, 32); return k; }
            ifid = rd16(r, body);
            ts = ((uint64_t)rd32(r, body + 4) << 32) | rd32(r, body + 8);
            caplen = rd32(r, body + 12);
            len = rd32(r, body + 16);
            hdr = 20;
            break;
        case PCAPNG_SPB:
            if (blen < 16) { too_short(r, pos, "simple packet block", blen, 16); return k; }
            if (r->nifs == 0) {
                set_error(r, LT_ERR_CORRUPT, pos,
                          "corrupt pcapng simple packet block at byte %zu: section %u has no interface 0", pos,
                          r->section);
                return k;
            }
            ifc = &r->ifs[0];
            len = rd32(r, body);
            caplen = len;
            if (ifc->snaplen && caplen > ifc->snaplen) caplen = ifc->snaplen;
            if (caplen > bl - 4) caplen = (uint32_t)(bl - 4);
            f->data = body + 4;
            f->offset = pos;
            f->ts_ns = 0;
            f->caplen = caplen;
            f->wire_len = len;
            f->linktype = ifc->linktype;
            f->interface_id = 0;
            f->section = r->section;
            f->rflags = rf_be | LT_RF_NO_TIMESTAMP;
            k++;
            goto next_block;
        default:
            r->info.skipped_blocks++;
            goto next_block;
        }
        /* EPB / PB */
        if (ifid >= r->nifs) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt pcapng packet block at byte %zu: interface %u is not defined in section %u (%u defined)",
                      pos, ifid, r->section, r->nifs);
            return k;
        }
        if ((uint64_t)caplen > bl - hdr) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt pcapng packet block at byte %zu: caplen %u overruns the %u-byte block", pos, caplen,
                      blen);
            return k;
        }
        ifc = &r->ifs[ifid];
        f->data = body + hdr;
        f->offset = pos;
        f->ts_ns = ts_to_ns(ifc, ts);
        f->caplen = caplen;
        f->wire_len = len;
        f->linktype = ifc->linktype;
        f->interface_id = ifid;
        f->section = r->section;
        f->rflags = rf_be | ((ifc->snaplen && caplen > ifc->snaplen) ? LT_RF_CAPLEN_GT_SNAPLEN : 0) |
                    (caplen > len ? LT_RF_CAPLEN_GT_WIRELEN : 0);
        k++;
    next_block:
        r->pos = pos + blen;
    }
    return k;
}

/* Find the first IDB of the first section without consuming anything (fills info early). */
static void pcapng_peek_first_if(lt_reader *r) {
    size_t pos = r->pos;
    while (r->size - pos >= 12) {
        const uint8_t *p = r->map + pos;
        uint32_t type = rd32(r, p), blen = rd32(r, p + 4);
        if (blen < 12 || (blen & 3) || blen > r->size - pos) return;
        if (type == PCAPNG_IDB) {
            if (blen >= 20) {
                r->info.linktype = rd16(r, p + 8);
                r->info.snaplen = rd32(r, p + 12);
            }
            return;
        }
        if (type == PCAPNG_SHB || type == PCAPNG_EPB || type == PCAPNG_SPB || type == PCAPNG_PB) return;
        pos += blen;
    }
}

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
    set_error(r, LT_ERR_IO, off,
              "the file shrank while it was read: byte %llu of %zu is gone (truncated by another program?)",
              (unsigned long long)off, r->size);
}

/* ------------------------------------------------------------------ public API */

int lt_reader_open(const char *path, lt_reader **out, char *err, size_t errlen) {
    *out = NULL;
    if (err && errlen) err[0] = 0;
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
    size_t size = (size_t)st.st_size;
    if (size < 4) {
        close(fd);
        if (size == 0)
            lt_errf(err, errlen, "%s: empty file (0 bytes), not a pcap or pcapng capture", path);
        else
            lt_errf(err, errlen, "%s: %zu-byte file is too short to be a pcap or pcapng capture", path, size);
        return LT_ERR_FORMAT;
    }
    pthread_once(&bus_once, bus_install);
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (m == MAP_FAILED) {
        lt_errf(err, errlen, "%s: cannot mmap: %s", path, strerror(saved));
        return LT_ERR_IO;
    }
    (void)madvise(m, size, MADV_SEQUENTIAL);

    lt_reader *r = calloc(1, sizeof *r);
    if (!r) {
        munmap(m, size);
        lt_errf(err, errlen, "%s: out of memory", path);
        return LT_ERR_NOMEM;
    }
    r->map = m;
    r->size = size;
    r->info.file_size = size;
    const uint8_t *p = r->map;
    uint32_t magic = lt_load_le32(p);
    int st_code = LT_OK;

    if (magic == PCAPNG_SHB) {
        r->info.format = LT_FMT_PCAPNG;
        uint32_t type, blen;
        st_code = check_block(r, 0, &type, &blen);
        if (st_code == LT_EOF) {
            lt_errf(err, errlen, "%s: %s", path, r->info.message);
            st_code = LT_ERR_CORRUPT;
        } else if (st_code == LT_OK) {
            st_code = parse_shb(r, 0, blen, 1);
            if (st_code == LT_OK) {
                r->pos = blen;
                pcapng_peek_first_if(r);
                *out = r;
                return LT_OK;
            }
            lt_errf(err, errlen, "%s: %s", path, r->info.message);
        } else {
            lt_errf(err, errlen, "%s: %s", path, r->info.message);
        }
        lt_reader_close(r);
        return st_code;
    }

    int fmt = 0;
    switch (magic) {
    case 0xA1B2C3D4u: fmt = LT_FMT_PCAP_US; r->be = 0; break;
    case 0xD4C3B2A1u: fmt = LT_FMT_PCAP_US; r->be = 1; break;
    case 0xA1B23C4Du: fmt = LT_FMT_PCAP_NS; r->be = 0; break;
    case 0x4D3CB2A1u: fmt = LT_FMT_PCAP_NS; r->be = 1; break;
    case 0xA1B2CD34u: fmt = LT_FMT_PCAP_MODIFIED; r->be = 0; break;
    case 0x34CDB2A1u: fmt = LT_FMT_PCAP_MODIFIED; r->be = 1; break;
    default:
        lt_errf(err, errlen, "%s: not a pcap or pcapng capture (unknown magic %02x %02x %02x %02x)", path, p[0], p[1],
                p[2], p[3]);
        lt_reader_close(r);
        return LT_ERR_FORMAT;
    }
    r->info.format = fmt;
    if (size < 24) {
        lt_errf(err, errlen, "%s: truncated pcap file header: %zu of 24 bytes", path, size);
        lt_reader_close(r);
        return LT_ERR_CORRUPT;
    }
    uint16_t maj = rd16(r, p + 4), min = rd16(r, p + 6);
    r->info.version_major = maj;
    r->info.version_minor = min;
    if (maj != 2) {
        lt_errf(err, errlen, "%s: unsupported pcap version %u.%u (only 2.x is read)", path, maj, min);
        lt_reader_close(r);
        return LT_ERR_FORMAT;
    }
    r->snaplen = rd32(r, p + 16);
    r->linktype = rd32(r, p + 20) & 0xFFFFu;
    r->info.snaplen = r->snaplen;
    r->info.linktype = r->linktype;
    r->rec_hdr = fmt == LT_FMT_PCAP_MODIFIED ? 24 : 16;
    r->frac_unit = fmt == LT_FMT_PCAP_NS ? 1 : 1000;
    uint32_t s = r->snaplen > LT_MAX_CAPLEN ? LT_MAX_CAPLEN : r->snaplen;
    r->plausible = s > LT_PLAUSIBLE_CAPLEN ? s : LT_PLAUSIBLE_CAPLEN;
    r->pos = 24;
    *out = r;
    return LT_OK;
}

int lt_reader_next(lt_reader *r, lt_frame *frames, size_t max, size_t *n) {
    *n = 0;
    if (r->state) return r->state;
    if (!frames || max == 0) return LT_ERR_ARG;
    if (r->ops) {
        int st = r->ops->next(r->src, frames, max, n, &r->info);
        r->info.frames += *n;
        if (st != LT_OK && *n == 0) r->state = st;
        return *n ? LT_OK : st;
    }
    lt_bus_guard g;
    lt_bus_guard_push(&g, r);
    if (sigsetjmp(g.jb, 0)) { /* the file shrank: none of this call's frames is handed out */
        lt_reader_fail_shrunk(r, g.fault);
        return LT_ERR_IO;
    }
    size_t k = r->info.format == LT_FMT_PCAPNG ? pcapng_next(r, frames, max) : pcap_next(r, frames, max);
    lt_bus_guard_pop(&g);
    r->info.frames += k;
    *n = k;
    if (k) return LT_OK;
    return r->state ? r->state : LT_EOF;
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
    return r->ops == NULL;  /* a file: frames point into the map, valid until the reader is closed */
}

void *lt_reader_source(const lt_reader *r, const lt_source_ops *ops) {
    return r && r->ops == ops ? r->src : NULL;
}

void lt_reader_close(lt_reader *r) {
    if (!r) return;
    if (r->ops && r->ops->close) r->ops->close(r->src);
    if (r->map) munmap((void *)r->map, r->size);
    free(r->ifs);
    free(r);
}
