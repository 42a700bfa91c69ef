/*
 * ERF (Endace DAG "Extensible Record Format"): a file is a run of records with no file header.
 * General policies (format detection, truncated vs corrupt): reader.c.
 *
 * A record: a 16-byte header, then extension headers, then (Ethernet types) a 2-byte offset/pad
 *   field, then the captured bytes, padded to rlen.
 *     0  ts    u64 little-endian fixed point: seconds in the high 32 bits, a binary fraction of a
 *              second in the low 32 bits
 *     8  type  u8: the record type in bits 0-6; bit 7 = an extension header follows the header
 *     9  flags u8: bits 0-1 the capture interface, bit 2 variable-length record (set by every
 *              writer since the DAG 2.5 cards), bit 3 truncated, bit 4 receive error
 *     10 rlen  u16 big-endian: the record's length, header and padding included
 *     12 lctr  u16 big-endian: frames lost since the previous record (a "colour" in the colour
 *              types, not a count)
 *     14 wlen  u16 big-endian: the frame's length on the wire
 *   Each extension header is 8 bytes; bit 7 of its first byte says that another follows.
 *
 * Records read: Ethernet (ETH 2 and its colour variants 11, 16, 20: LINKTYPE_ETHERNET, after the
 *   2-byte pad), IPv4 (22: LINKTYPE_IPV4) and IPv6 (23: LINKTYPE_IPV6). caplen = min(wlen, the
 *   bytes after the headers) (records are padded to 8 bytes, so the bytes left can exceed wlen).
 *   PAD (48) and META (27, provenance) records are skipped (info.skipped_blocks). Any other type
 *   (HDLC, ATM, InfiniBand, ...) -> LT_ERR_FORMAT naming the type and byte offset, after every
 *   frame before it was handed out.
 * Drops: with lt_reader_declare_losses on (capture), a non-zero loss counter of an ETH, IPv4 or
 *   IPv6 record is handed out first as an LT_RF_GAP pseudo-frame (wire_len = the count, ts_ns =
 *   the record's): the ledger records it as declared drops, as it does a live interface's.
 * Timestamps -> int64 ns: seconds * 1e9 + (fraction * 1e9 + 2^31) >> 32 (rounded to nearest, as
 *   wiretap does).
 * Truncated: fewer than 16 header bytes left, or a record whose rlen runs past EOF.
 * Corrupt: rlen below 16, or below its headers (extension headers, Ethernet pad).
 */
#include "reader_format.h"

#define ERF_HDR 16u
#define ERF_ETH_PAD 2u
#define ERF_TYPE_ETH 2u
#define ERF_TYPE_COLOR_ETH 11u
#define ERF_TYPE_DSM_COLOR_ETH 16u
#define ERF_TYPE_COLOR_HASH_ETH 20u
#define ERF_TYPE_IPV4 22u
#define ERF_TYPE_IPV6 23u
#define ERF_TYPE_META 27u
#define ERF_TYPE_PAD 48u
#define ERF_FLAG_VLEN 0x04u
#define LINKTYPE_ETHERNET 1u
#define LINKTYPE_IPV4 228u
#define LINKTYPE_IPV6 229u

/* The link type of a record type read as frames; 0 for the others. */
static uint32_t erf_linktype(unsigned type) {
    switch (type) {
    case ERF_TYPE_ETH:
    case ERF_TYPE_COLOR_ETH:
    case ERF_TYPE_DSM_COLOR_ETH:
    case ERF_TYPE_COLOR_HASH_ETH:
        return LINKTYPE_ETHERNET;
    case ERF_TYPE_IPV4:
        return LINKTYPE_IPV4;
    case ERF_TYPE_IPV6:
        return LINKTYPE_IPV6;
    default:
        return 0;
    }
}

static int erf_has_pad(unsigned type) { return erf_linktype(type) == LINKTYPE_ETHERNET; }

/* The loss counter is a count only in the uncoloured types. */
static int erf_counts_losses(unsigned type) {
    return type == ERF_TYPE_ETH || type == ERF_TYPE_IPV4 || type == ERF_TYPE_IPV6;
}

static int64_t erf_ts_ns(uint64_t ts) {
    uint64_t sec = ts >> 32, frac = (ts & 0xFFFFFFFFu) * 1000000000u;
    frac = (frac + 0x80000000u) >> 32; /* round to the nearest ns */
    return (int64_t)(sec * 1000000000u + frac);
}

/* A plausible record header at p (n >= 16 bytes there): a known type and the variable-length
 * flag. */
static int erf_plausible(const uint8_t *p) {
    unsigned type = p[8] & 0x7Fu;
    int known = (type >= 1 && type <= 29 && type != 26) || type == ERF_TYPE_PAD;
    return known && (p[9] & ERF_FLAG_VLEN);
}

/* ERF has no magic number: the first record must look like one with an rlen that holds its
 * header, and the second must look like one where the bytes probed hold its header (its length is
 * left to the reader, which names a bad one). Probed after every format that has a magic. */
static int erf_probe(const uint8_t *head, size_t n) {
    if (n < ERF_HDR || !erf_plausible(head)) return 0;
    uint32_t rlen = lt_load_be16(head + 10);
    if (rlen < ERF_HDR + ((head[8] & 0x80u) ? 8u : 0u)) return 0;
    if (n >= (size_t)rlen + ERF_HDR) return erf_plausible(head + rlen);
    return 1;
}

static int erf_open(lt_reader *r) {
    r->info.format = LT_FMT_ERF;
    r->be = 1; /* the lengths are big-endian (the timestamp is not) */
    r->linktype = erf_linktype(r->map[8] & 0x7Fu);
    r->info.linktype = r->linktype;
    r->pos = 0;
    return LT_OK;
}

/* The offset of the frame bytes in the record at p (rlen bytes, at file offset pos), or 0 after
 * set_error: its extension headers and pad must fit in rlen. */
static uint32_t erf_payload_at(lt_reader *r, const uint8_t *p, uint32_t rlen, size_t pos,
                               unsigned type) {
    uint32_t o = ERF_HDR;
    int more = (p[8] & 0x80u) != 0;
    while (more) {
        if (o + 8 > rlen) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt ERF record at byte %zu: its extension headers run past its "
                      "length %u",
                      AT(r, pos), rlen);
            return 0;
        }
        more = (p[o] & 0x80u) != 0;
        o += 8;
    }
    if (erf_has_pad(type)) {
        if (o + ERF_ETH_PAD > rlen) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt ERF record at byte %zu: length %u leaves no room for the "
                      "Ethernet pad",
                      AT(r, pos), rlen);
            return 0;
        }
        o += ERF_ETH_PAD;
    }
    return o;
}

static size_t erf_next(lt_reader *r, lt_frame *out, size_t max) {
    size_t k = 0;
    while (k < max) {
        const size_t pos = r->pos, rem = r->size - pos;
        if (rem == 0) {
            r->state = LT_EOF;
            break;
        }
        if (rem < ERF_HDR) {
            set_truncated(r, pos, rem, "truncated ERF record at byte %zu: %zu of %u header bytes",
                          AT(r, pos), rem, ERF_HDR);
            break;
        }
        const uint8_t *p = r->map + pos;
        __builtin_prefetch(p + 4096); /* a page ahead, as pcap_next */
        const unsigned type = p[8] & 0x7Fu;
        const uint32_t rlen = lt_load_be16(p + 10), lctr = lt_load_be16(p + 12);
        const uint32_t wlen = lt_load_be16(p + 14);
        if (rlen < ERF_HDR) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt ERF record at byte %zu: length %u below the 16-byte header",
                      AT(r, pos), rlen);
            break;
        }
        if (rlen > rem) {
            set_truncated(r, pos, rem,
                          "truncated ERF record at byte %zu: %zu of %u bytes (type %u)", AT(r, pos),
                          rem, rlen, type);
            break;
        }
        if (type == ERF_TYPE_PAD || type == ERF_TYPE_META) {
            r->info.skipped_blocks++;
            r->pos = pos + rlen;
            continue;
        }
        const uint32_t linktype = erf_linktype(type);
        if (!linktype) {
            set_error(r, LT_ERR_FORMAT, pos,
                      "ERF record at byte %zu has type %u: only Ethernet (2, 11, 16, 20), "
                      "IPv4 (22) and IPv6 (23) records are read",
                      AT(r, pos), type);
            break;
        }
        const uint32_t at = erf_payload_at(r, p, rlen, pos, type);
        if (!at) break;
        const int64_t ts = erf_ts_ns(lt_load_le64(p));
        const uint64_t off = r->base + pos;
        if (lctr && r->erf_losses && erf_counts_losses(type) && r->erf_gap_done != off + 1) {
            lt_frame *g = &out[k++];
            memset(g, 0, sizeof *g);
            g->offset = off;
            g->ts_ns = ts;
            g->wire_len = lctr;
            g->linktype = linktype;
            g->rflags = LT_RF_GAP;
            r->erf_gap_done = off + 1; /* the record itself next, in this call or the next one */
            if (k == max) break;
        }
        const uint32_t avail = rlen - at, caplen = avail < wlen ? avail : wlen;
        lt_frame *f = &out[k++];
        f->data = p + at;
        f->offset = off;
        f->ts_ns = ts;
        f->caplen = caplen;
        f->wire_len = wlen;
        f->linktype = linktype;
        f->interface_id = p[9] & 0x03u;
        f->section = 0;
        f->rflags = 0;
        r->pos = pos + rlen;
    }
    return k;
}

const lt_format lt_format_erf = {erf_probe, erf_open, erf_next};
