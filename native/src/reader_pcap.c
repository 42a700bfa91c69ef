/*
 * Classic pcap (µs / ns / "modified" Kuznetzov, either byte order): the file header and the
 * record loop. General policies (format detection, truncated vs corrupt): reader.c.
 *
 * Versions: major 2 is accepted with any minor (2.4 is normal; 2.5 and up are read like 2.4);
 *   any other major -> LT_ERR_FORMAT at open (libpcap and wiretap both reject 1.x). A file header
 *   cut short (< 24 bytes) -> LT_ERR_CORRUPT at open.
 *   Below 2.3 the record header holds the original length before the captured one (the fields
 *   were interchanged at 2.3 to match the BPF header): for 2.0-2.2 both are swapped back on every
 *   record, and for 2.3 on a record whose caplen exceeds its wire length (some 2.3 writers kept
 *   the old order). This is libpcap's (sf-pcap.c) and wiretap's (libpcap.c) rule; the swap comes
 *   before every caplen check below.
 *
 * Link type: the header field is masked to its lower 16 bits (bits 16-31 are reserved / FCS
 *   information). Every link type is read; none is rejected.
 *
 * Lengths: caplen > file snaplen (snaplen != 0): the full caplen is delivered and the frame gets
 *   LT_RF_CAPLEN_GT_SNAPLEN (wiretap's view; libpcap would cut to snaplen). caplen > wire len:
 *   delivered, LT_RF_CAPLEN_GT_WIRELEN. caplen 0 is a valid empty frame.
 *
 * Truncated: fewer than 16 (24 for the modified format) header bytes left; or a header whose
 *   caplen runs past EOF but is <= max(file snaplen, 262144) (a plausible packet cut by the end
 *   of the file).
 * Corrupt: caplen > LT_MAX_CAPLEN (256 MiB), whatever follows; or caplen runs past EOF and is
 *   also > max(snaplen, 262144): that header is garbage, not a cut packet (the corpus'
 *   sv__bug-1450-04, sv__smtp-to-comma, sv__bug-6875-01_fuzz, derived__huge_caplen,
 *   derived__cat_two_pcaps, all of which wiretap/libpcap also call corrupt).
 *
 * Timestamps -> int64 ns since the epoch: (u32)sec * 1e9 + (u32)fraction * (1000 | 1); a fraction
 *   out of range is NOT rejected.
 */
#include "reader_format.h"

static int pcap_probe(const uint8_t *head, size_t n) {
    (void)n;
    switch (lt_load_le32(head)) {
    case 0xA1B2C3D4u: case 0xD4C3B2A1u: case 0xA1B23C4Du: case 0x4D3CB2A1u: case 0xA1B2CD34u: case 0x34CDB2A1u:
        return 1;
    default:
        return 0;
    }
}

static int pcap_open(lt_reader *r) {
    const uint8_t *p = r->map;
    int fmt = 0;
    switch (lt_load_le32(p)) {
    case 0xA1B2C3D4u: fmt = LT_FMT_PCAP_US; r->be = 0; break;
    case 0xD4C3B2A1u: fmt = LT_FMT_PCAP_US; r->be = 1; break;
    case 0xA1B23C4Du: fmt = LT_FMT_PCAP_NS; r->be = 0; break;
    case 0x4D3CB2A1u: fmt = LT_FMT_PCAP_NS; r->be = 1; break;
    case 0xA1B2CD34u: fmt = LT_FMT_PCAP_MODIFIED; r->be = 0; break;
    default: fmt = LT_FMT_PCAP_MODIFIED; r->be = 1; break; /* 0x34CDB2A1, the last magic pcap_probe takes */
    }
    r->info.format = fmt;
    if (r->size < 24) return set_error(r, LT_ERR_CORRUPT, 0, "truncated pcap file header: %zu of 24 bytes", r->size);
    uint16_t maj = rd16(r, p + 4), min = rd16(r, p + 6);
    r->info.version_major = maj;
    r->info.version_minor = min;
    if (maj != 2) return set_error(r, LT_ERR_FORMAT, 0, "unsupported pcap version %u.%u (only 2.x is read)", maj, min);
    r->lenswap = min < 3 ? LT_LENS_SWAPPED : min == 3 ? LT_LENS_MAYBE_SWAPPED : LT_LENS_IN_ORDER;
    r->snaplen = rd32(r, p + 16);
    r->linktype = rd32(r, p + 20) & 0xFFFFu;
    r->info.snaplen = r->snaplen;
    r->info.linktype = r->linktype;
    r->rec_hdr = fmt == LT_FMT_PCAP_MODIFIED ? 24 : 16;
    r->frac_unit = fmt == LT_FMT_PCAP_NS ? 1 : 1000;
    uint32_t s = r->snaplen > LT_MAX_CAPLEN ? LT_MAX_CAPLEN : r->snaplen;
    r->plausible = s > LT_PLAUSIBLE_CAPLEN ? s : LT_PLAUSIBLE_CAPLEN;
    r->pos = 24;
    return LT_OK;
}

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
    const int lenswap = r->lenswap;
    const uint64_t base = r->base;
    size_t pos = r->pos;
#define RD32(p) (be ? lt_load_be32(p) : lt_load_le32(p))
    while (k < max) {
        const size_t rem = size - pos;
        if (rem == 0) {
            r->state = LT_EOF;
            break;
        }
        if (rem < hl) {
            set_truncated(r, pos, rem, "truncated record at byte %zu: %zu of %zu header bytes", AT(r, pos), rem, hl);
            break;
        }
        const uint8_t *p = map + pos;
        __builtin_prefetch(p + 4096); /* a page ahead: the stream prefetcher stops at a page's end */
        uint32_t sec = RD32(p), frac = RD32(p + 4), caplen = RD32(p + 8), len = RD32(p + 12);
        if (lenswap && (lenswap == LT_LENS_SWAPPED || caplen > len)) { /* pre-2.3 field order */
            const uint32_t t = caplen;
            caplen = len;
            len = t;
        }
        if (caplen > LT_MAX_CAPLEN) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt record header at byte %zu: caplen %u exceeds the %u-byte limit (%zu bytes left)",
                      AT(r, pos), caplen, LT_MAX_CAPLEN, rem);
            break;
        }
        if (caplen > rem - hl) {
            if (caplen <= r->plausible)
                set_truncated(r, pos, rem, "truncated record at byte %zu: %zu of %zu bytes (caplen %u)", AT(r, pos), rem,
                              hl + (size_t)caplen, caplen);
            else {
                set_error(r, LT_ERR_CORRUPT, pos,
                          "corrupt record header at byte %zu: caplen %u exceeds both the snaplen %u and the "
                          "%zu bytes left",
                          AT(r, pos), caplen, snaplen, rem - hl);
                r->undecided = 1; /* a stream may yet hold the bytes: reader.c reads on */
            }
            break;
        }
        lt_frame *f = &out[k++];
        f->data = p + hl;
        f->offset = base + pos;
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

const lt_format lt_format_pcap = {pcap_probe, pcap_open, pcap_next};
