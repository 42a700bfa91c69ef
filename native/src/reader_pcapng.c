/*
 * pcapng: sections, interfaces and packet blocks. General policies (format detection, truncated
 * vs corrupt): reader.c.
 *
 * Versions: SHB 1.0 is accepted, and 1.2 (written by some old tools; libpcap accepts it too).
 *   Anything else (0.1, 1.1, 2.0, ...) -> LT_ERR_FORMAT at the SHB's offset: at open for the
 *   first section, otherwise from lt_reader_next() after every frame before it was handed out
 *   (this is what wiretap and libpcap do; we do not guess at skipping the section). A first SHB
 *   cut short or malformed -> LT_ERR_CORRUPT at open.
 *
 * Truncated: fewer than 8 block-header bytes left (12 for an SHB); or a block whose length passes
 *   the structural checks below but runs past EOF.
 * Corrupt: block length < 12, not a multiple of 4 (even if a reader could guess the pad, e.g.
 *   pythonpcapng__test006.ntar, which wiretap tolerates), > LT_MAX_BLOCK (256 MiB), trailer length
 *   != header length, shorter than its block type's fixed part, a packet length that overruns its
 *   block, an IDB option that overruns its block, a packet on an interface the section has not
 *   defined, an SHB with a bad byte-order magic, or more than LT_MAX_IFACES interfaces in one
 *   section.
 *
 * Timestamps -> int64 ns since the epoch: a 64-bit count in the interface's if_tsresol unit
 *   (decimal 10^-n, binary 2^-n when the high bit is set; default 10^-6), converted with 128-bit
 *   arithmetic (binary: floor), plus if_tsoffset seconds; a value outside int64 saturates.
 *   SPB: ts 0 + LT_RF_NO_TIMESTAMP. Interface ids and tsresol are per section; each section has
 *   its own byte order.
 *
 * Blocks: SHB, IDB, EPB, SPB (caplen = min(wire len, interface 0 snaplen unless 0, bytes in
 *   block)), obsolete PB (type 2) are interpreted; every other block type (NRB, ISB, DSB, custom,
 *   unknown) is checked structurally and skipped (info.skipped_blocks).
 *
 * Damaged but read past (info.damaged_blocks, the first named in info.warning): an SHB, EPB, PB or
 *   ISB option whose length runs past its block, an ISB shorter than its 24-byte minimum. wiretap
 *   stops reading at them (its frames after that one are lost); the blocks' lengths are sound, so
 *   the frames after them are read, and the caller warns.
 *
 * Chunks (lt_reader_next_before, lt_reader_pcapng_context): the reader keeps the offset and length
 * of the current SHB and of each IDB of its section, so that the blocks from a packet block on can
 * be read on their own behind copies of those (the state a packet block depends on: byte order,
 * interface link types, snap lengths, if_tsresol, if_tsoffset).
 */
#include <stdlib.h>

#include "reader_format.h"

#define PCAPNG_SHB 0x0A0D0D0Au
#define PCAPNG_IDB 1u
#define PCAPNG_PB 2u
#define PCAPNG_SPB 3u
#define PCAPNG_EPB 6u
#define PCAPNG_ISB 5u

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
                         LT_MAX_IFACES, r->section, AT(r, pos));
    if (r->nifs == r->cap_ifs) {
        uint32_t nc = r->cap_ifs ? r->cap_ifs * 2 : 8;
        lt_iface *n = realloc(r->ifs, (size_t)nc * sizeof *n);
        if (!n) return set_error(r, LT_ERR_NOMEM, pos, "out of memory for pcapng interface at byte %zu", AT(r, pos));
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
    ifc.block_off = AT(r, pos);
    ifc.block_len = (uint32_t)(blen + 12);
    size_t o = 8;
    while (o + 4 <= blen) {
        uint16_t code = rd16(r, body + o), olen = rd16(r, body + o + 2);
        if (code == 0) break; /* opt_endofopt */
        if ((size_t)olen > blen - o - 4)
            return set_error(r, LT_ERR_CORRUPT, pos,
                             "corrupt pcapng IDB at byte %zu: option %u of length %u overruns the block", AT(r, pos), code,
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
        set_truncated(r, pos, rem, "truncated pcapng block at byte %zu: %zu of 8 header bytes", AT(r, pos), rem);
        return LT_EOF;
    }
    uint32_t type = lt_load_le32(p); /* the SHB type is a byte palindrome */
    if (type == PCAPNG_SHB) {
        if (rem < 12) {
            set_truncated(r, pos, rem, "truncated pcapng section header at byte %zu: %zu of 12 header bytes", AT(r, pos),
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
                             "corrupt pcapng section header at byte %zu: bad byte-order magic 0x%08x", AT(r, pos), bom);
    } else {
        type = rd32(r, p);
    }
    uint32_t blen = rd32(r, p + 4);
    if (blen < 12 || (blen & 3))
        return set_error(r, LT_ERR_CORRUPT, pos,
                         "corrupt pcapng block at byte %zu: type 0x%x has length %u (%s)", AT(r, pos), type, blen,
                         blen < 12 ? "below the 12-byte minimum" : "not a multiple of 4");
    if (blen > LT_MAX_BLOCK)
        return set_error(r, LT_ERR_CORRUPT, pos,
                         "corrupt pcapng block at byte %zu: type 0x%x has length %u, over the %u-byte limit", AT(r, pos),
                         type, blen, LT_MAX_BLOCK);
    if (blen > rem) {
        set_truncated(r, pos, rem, "truncated pcapng block at byte %zu: %zu of %u bytes (type 0x%x)", AT(r, pos), rem,
                      blen, type);
        return LT_EOF;
    }
    uint32_t trailer = rd32(r, p + blen - 4);
    if (trailer != blen)
        return set_error(r, LT_ERR_CORRUPT, pos,
                         "corrupt pcapng block at byte %zu: type 0x%x trailer length %u differs from header length %u",
                         AT(r, pos), type, trailer, blen);
    *type_out = type;
    *blen_out = blen;
    return LT_OK;
}

/* A block read past although it is damaged (wiretap stops at it): counted, the first named. */
static void note_damaged(lt_reader *r, size_t pos, const char *what, const char *why, uint32_t a,
                         uint32_t b) {
    if (r->info.damaged_blocks++) return;
    r->info.damaged_offset = AT(r, pos);
    char detail[96];
    snprintf(detail, sizeof detail, why, a, b);
    snprintf(r->info.warning, sizeof r->info.warning,
             "damaged pcapng %s at byte %zu: %s (read past it)", what, AT(r, pos), detail);
}

/* Check the options at body[o, blen) of the block at pos: an option whose length runs past the
 * block is noted (note_damaged); the block is read all the same. */
static void check_options(lt_reader *r, const uint8_t *body, size_t blen, size_t o, size_t pos,
                          const char *what) {
    while (o + 4 <= blen) {
        uint16_t code = rd16(r, body + o), olen = rd16(r, body + o + 2);
        if (code == 0) return; /* opt_endofopt */
        if ((size_t)olen > blen - o - 4) {
            note_damaged(r, pos, what, "option %u of length %u overruns the block", code, olen);
            return;
        }
        o += 4 + (((size_t)olen + 3) & ~(size_t)3);
    }
}

static int too_short(lt_reader *r, size_t pos, const char *what, uint32_t blen, uint32_t min) {
    return set_error(r, LT_ERR_CORRUPT, pos, "corrupt pcapng %s at byte %zu: block length %u below its minimum %u",
                     what, AT(r, pos), blen, min);
}

/* Handle the SHB fields after check_block(). */
static int parse_shb(lt_reader *r, size_t pos, uint32_t blen, int first) {
    if (blen < 28) return too_short(r, pos, "section header", blen, 28);
    const uint8_t *p = r->map + pos;
    uint16_t maj = rd16(r, p + 12), min = rd16(r, p + 14);
    if (!(maj == 1 && (min == 0 || min == 2)))
        return set_error(r, LT_ERR_FORMAT, pos, "unsupported pcapng section version %u.%u at byte %zu", maj, min, AT(r, pos));
    if (first) {
        r->info.version_major = maj;
        r->info.version_minor = min;
    } else {
        r->section++;
    }
    r->info.sections++;
    r->nifs = 0;
    r->shb_off = AT(r, pos);
    r->shb_len = blen;
    check_options(r, p + 8, blen - 12, 16, pos, "section header");
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
        __builtin_prefetch(r->map + pos + 4096); /* a page ahead, as pcap_next */
        uint32_t type, blen;
        if (check_block(r, pos, &type, &blen) != LT_OK) break;
        if (r->pausing && AT(r, pos) >= r->pause_before &&
            (type == PCAPNG_EPB || type == PCAPNG_PB || type == PCAPNG_SPB)) {
            r->paused = 1; /* lt_reader_next_before: r->pos stays at this packet block */
            break;
        }
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
                          "corrupt pcapng simple packet block at byte %zu: section %u has no interface 0", AT(r, pos),
                          r->section);
                return k;
            }
            ifc = &r->ifs[0];
            len = rd32(r, body);
            caplen = len;
            if (ifc->snaplen && caplen > ifc->snaplen) caplen = ifc->snaplen;
            if (caplen > bl - 4) caplen = (uint32_t)(bl - 4);
            f->data = body + 4;
            f->offset = r->base + pos;
            f->ts_ns = 0;
            f->caplen = caplen;
            f->wire_len = len;
            f->linktype = ifc->linktype;
            f->interface_id = 0;
            f->section = r->section;
            f->rflags = rf_be | LT_RF_NO_TIMESTAMP;
            k++;
            goto next_block;
        case PCAPNG_ISB:
            r->info.skipped_blocks++;
            if (blen < 24)
                note_damaged(r, pos, "interface statistics block",
                             "block length %u below its minimum %u", blen, 24);
            else
                check_options(r, body, bl, 12, pos, "interface statistics block");
            goto next_block;
        default:
            r->info.skipped_blocks++;
            goto next_block;
        }
        /* EPB / PB */
        if (ifid >= r->nifs) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt pcapng packet block at byte %zu: interface %u is not defined in section %u (%u defined)",
                      AT(r, pos), ifid, r->section, r->nifs);
            return k;
        }
        if ((uint64_t)caplen > bl - hdr) {
            set_error(r, LT_ERR_CORRUPT, pos,
                      "corrupt pcapng packet block at byte %zu: caplen %u overruns the %u-byte block", AT(r, pos), caplen,
                      blen);
            return k;
        }
        check_options(r, body, bl, hdr + (((size_t)caplen + 3) & ~(size_t)3), pos,
                      type == PCAPNG_EPB ? "enhanced packet block" : "packet block");
        ifc = &r->ifs[ifid];
        f->data = body + hdr;
        f->offset = r->base + pos;
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

int lt_reader_pcapng_context(const lt_reader *r, uint64_t *ranges, size_t max, size_t *n, uint64_t *next) {
    *n = 0;
    if (r->fmt != &lt_format_pcapng || r->stream) return LT_ERR_ARG;
    *n = 1 + (size_t)r->nifs;
    *next = AT(r, r->pos);
    if (*n > max || !ranges) return LT_ERR_ARG;
    ranges[0] = r->shb_off;
    ranges[1] = r->shb_len;
    for (uint32_t i = 0; i < r->nifs; i++) {
        ranges[2 + 2 * (size_t)i] = r->ifs[i].block_off;
        ranges[3 + 2 * (size_t)i] = r->ifs[i].block_len;
    }
    return LT_OK;
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

static int pcapng_probe(const uint8_t *head, size_t n) {
    (void)n;
    return lt_load_le32(head) == PCAPNG_SHB;
}

/* The first section header must be whole and valid: a cut or malformed one is corrupt at open. */
static int pcapng_open(lt_reader *r) {
    r->info.format = LT_FMT_PCAPNG;
    uint32_t type, blen;
    int st = check_block(r, 0, &type, &blen);
    if (st == LT_EOF) return LT_ERR_CORRUPT;
    if (st != LT_OK) return st;
    st = parse_shb(r, 0, blen, 1);
    if (st != LT_OK) return st;
    r->pos = blen;
    pcapng_peek_first_if(r);
    return LT_OK;
}

const lt_format lt_format_pcapng = {pcapng_probe, pcapng_open, pcapng_next};
