/*
 * Strip modes: which bytes of a captured frame the digest covers (docs/strip-modes.md, the exact
 * rules; docs/ledger-format.md, "Digests").
 *
 * lt_strip_range() returns a byte range [offset, offset + length) of the captured frame and the
 * record flags the strip adds (MALFORMED, NON_IP, FRAGMENT, UNSUPPORTED_LINKTYPE). TRUNCATED is
 * the engine's business (caplen < wire_len); wire_len is used here only to tell a snaplen cut
 * (an IP length past the capture is expected) from an inconsistent header (MALFORMED).
 *
 * Safety: every read is checked against `lim`, which never exceeds caplen, so nothing past the
 * captured bytes is ever read; the result always satisfies offset + length <= caplen. No
 * allocation, no global state: safe to call from any thread.
 *
 * On an inconsistency the frame gets MALFORMED and the range runs from the last valid offset
 * (the start of the first header that could not be followed) to the end of the capture.
 */
#include "ledgertool.h"
#include "lt_internal.h"

/* Link types (tcpdump.org/linktypes.html). */
#define LINKTYPE_NULL 0
#define LINKTYPE_ETHERNET 1
#define LINKTYPE_RAW 101
#define LINKTYPE_LOOP 108
#define LINKTYPE_LINUX_SLL 113
#define LINKTYPE_IPV4 228
#define LINKTYPE_IPV6 229
#define LINKTYPE_LINUX_SLL2 276

#define ETH_IPV4 0x0800
#define ETH_IPV6 0x86DD

#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17

#define ROCE_V2_PORT 4791
#define IB_BTH_LEN 12
#define IB_ICRC_LEN 4

/* At most this many IPv6 extension headers are followed; more is treated as a loop (MALFORMED). */
#define LT_IPV6_MAX_EXT 16

/*
 * InfiniBand extended transport headers implied by the BTH opcode, in bytes (0xFF: opcode not
 * supported -> MALFORMED). Source: IBTA InfiniBand Architecture Specification Vol. 1, Release 1.4,
 * section 9.2 "Base Transport Header", Table 38 "OpCode field" (which headers each opcode
 * carries), header sizes from section 9.3 (RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8,
 * ImmDt 4, IETH 4, DETH 8); CNP (0x81) from the RoCEv2 annex A17.9.3 (BTH + 16 reserved bytes,
 * which we hash as payload). Cross-checked against Linux drivers/infiniband/sw/rxe/rxe_opcode.c.
 * Not supported (0xFF): RD (0x40-0x5F, needs RDETH+DETH; RoCE has no RD), XRC (0xA0-0xBF), and
 * the Release 1.5 additions (FLUSH, ATOMIC WRITE) together with every reserved code.
 *
 *   RC 0x00-0x17 / UC 0x20-0x2B (same low 5 bits):
 *     SEND First/Middle/Last/Only              0x00 0x01 0x02 0x04   -> 0
 *     SEND Last/Only with Immediate            0x03 0x05             -> ImmDt 4
 *     RDMA WRITE First / Only                  0x06 0x0A             -> RETH 16
 *     RDMA WRITE Middle / Last                 0x07 0x08             -> 0
 *     RDMA WRITE Last with Immediate           0x09                  -> ImmDt 4
 *     RDMA WRITE Only with Immediate           0x0B                  -> RETH+ImmDt 20
 *   RC only:
 *     RDMA READ Request                        0x0C                  -> RETH 16
 *     RDMA READ response First / Last / Only   0x0D 0x0F 0x10        -> AETH 4
 *     RDMA READ response Middle                0x0E                  -> 0
 *     Acknowledge                              0x11                  -> AETH 4
 *     ATOMIC Acknowledge                       0x12                  -> AETH+AtomicAckETH 12
 *     CmpSwap / FetchAdd                       0x13 0x14             -> AtomicETH 28
 *     SEND Last / Only with Invalidate         0x16 0x17             -> IETH 4
 *   UD: SEND Only 0x64 -> DETH 8; SEND Only with Immediate 0x65 -> DETH+ImmDt 12
 *   CNP 0x81 -> 0
 */
#define X 0xFF
static const uint8_t ib_ext_len[256] = {
    /* 0x00 RC */ 0, 0, 0, 4, 0, 4, 16, 0, 0, 4, 16, 20, 16, 4, 0, 4,
    /* 0x10 RC */ 4, 4, 12, 28, 28, X, 4, 4, X, X, X, X, X, X, X, X,
    /* 0x20 UC */ 0, 0, 0, 4, 0, 4, 16, 0, 0, 4, 16, 20, X, X, X, X,
    /* 0x30 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0x40 RD */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0x50 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0x60 UD */ X, X, X, X, 8, 12, X, X, X, X, X, X, X, X, X, X,
    /* 0x70 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0x80 CNP */ X, 0, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0x90 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0xA0 XRC */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0xB0 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0xC0 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0xD0 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0xE0 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
    /* 0xF0 */ X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
};
#undef X

/* Result helpers. */
#define RANGE(a, b) do { *off = (a); *len = (b) - (a); return fl; } while (0)
#define MALFORMED_FROM(a) do { fl |= LT_FLAG_MALFORMED; *off = (a); *len = caplen - (a); return fl; } while (0)

/*
 * The link-layer header: sets *l3 (offset of what follows it) and *proto (an EtherType-like
 * value: ETH_IPV4, ETH_IPV6, something else for non-IP, 0 when the header is cut).
 * Returns 0 for a supported link type, -1 for an unsupported one, 1 when the header is cut.
 */
static inline int link_header(uint32_t linktype, const uint8_t *p, uint32_t caplen, uint32_t *l3,
                              uint32_t *proto) {
    switch (linktype) {
    case LINKTYPE_ETHERNET: {
        if (caplen < 14) return 1;
        uint32_t o = 14, et = lt_load_be16(p + 12);
        /* 802.1Q (0x8100), 802.1ad (0x88A8) and the pre-standard QinQ TPID 0x9100, any depth. */
        while (et == 0x8100 || et == 0x88A8 || et == 0x9100) {
            if (caplen - o < 4) return 1;
            et = lt_load_be16(p + o + 2);
            o += 4;
        }
        *l3 = o;
        *proto = et;
        return 0;
    }
    case LINKTYPE_LINUX_SLL:
        if (caplen < 16) return 1;
        *l3 = 16;
        *proto = lt_load_be16(p + 14);
        return 0;
    case LINKTYPE_LINUX_SLL2:
        if (caplen < 20) return 1;
        *l3 = 20;
        *proto = lt_load_be16(p + 0);
        return 0;
    case LINKTYPE_NULL:
    case LINKTYPE_LOOP: {
        /* Address family in the capturing host's byte order (NULL) or network order (LOOP):
         * accept both. AF_INET is 2 everywhere; AF_INET6 is 24 (NetBSD/OpenBSD), 28 (FreeBSD),
         * 30 (macOS) and 10 (Linux). */
        if (caplen < 4) return 1;
        uint32_t le = lt_load_le32(p), be = lt_load_be32(p);
        *l3 = 4;
        if (le == 2 || be == 2)
            *proto = ETH_IPV4;
        else if (le == 24 || le == 28 || le == 30 || le == 10 || be == 24 || be == 28 || be == 30 || be == 10)
            *proto = ETH_IPV6;
        else
            *proto = 0xFFFF; /* some other family: not IP */
        return 0;
    }
    case LINKTYPE_RAW:
        if (caplen < 1) return 1;
        *l3 = 0;
        *proto = (p[0] >> 4) == 4 ? ETH_IPV4 : (p[0] >> 4) == 6 ? ETH_IPV6 : 0;
        return (*proto == 0) ? 1 : 0;
    case LINKTYPE_IPV4:
        *l3 = 0;
        *proto = ETH_IPV4;
        return 0;
    case LINKTYPE_IPV6:
        *l3 = 0;
        *proto = ETH_IPV6;
        return 0;
    default:
        return -1;
    }
}

uint16_t lt_strip_range(int strip, uint32_t linktype, const uint8_t *p, uint32_t caplen, uint32_t wire_len,
                        uint32_t *off, uint32_t *len) {
    uint16_t fl = 0;
    uint32_t l3 = 0, proto = 0;

    if (strip == LT_STRIP_FRAME) RANGE(0, caplen);

    int lk = link_header(linktype, p, caplen, &l3, &proto);
    if (lk < 0) {
        fl |= LT_FLAG_UNSUPPORTED_LINKTYPE;
        RANGE(0, caplen);
    }
    if (lk > 0) MALFORMED_FROM(0); /* link header cut, or raw IP that is not IPv4/IPv6 */

    if (proto != ETH_IPV4 && proto != ETH_IPV6) {
        fl |= LT_FLAG_NON_IP;
        RANGE(l3, caplen);
    }

    /* A cut frame (snaplen) may end before its IP packet does; an uncut one may not. */
    const int cut = caplen < wire_len;
    const uint8_t *ip = p + l3;
    const uint32_t avail = caplen - l3; /* captured bytes from the IP header on */
    uint32_t hdr;                       /* IP header length incl. IPv6 extension headers (so far) */
    uint64_t end;                       /* end of the IP packet as the headers declare it (may pass caplen) */
    int l4proto, nonfirst = 0;

    if (proto == ETH_IPV4) {
        if (avail < 20 || (ip[0] >> 4) != 4) MALFORMED_FROM(l3);
        hdr = (uint32_t)(ip[0] & 0x0F) * 4;
        uint32_t tot = lt_load_be16(ip + 2);
        if (hdr < 20) MALFORMED_FROM(l3);
        if (tot == 0) tot = avail;  /* TSO / BIG TCP: the captured bytes are the packet */
        if (tot < hdr) MALFORMED_FROM(l3);
        end = (uint64_t)l3 + tot;
        if (end > caplen && !cut) MALFORMED_FROM(l3);
        if (strip == LT_STRIP_L3) RANGE(l3, end < caplen ? (uint32_t)end : caplen);
        if (hdr > avail) MALFORMED_FROM(l3);
        uint32_t frag = lt_load_be16(ip + 6);
        if (frag & 0x3FFF) fl |= LT_FLAG_FRAGMENT; /* MF or a fragment offset */
        nonfirst = (frag & 0x1FFF) != 0;
        l4proto = ip[9];
    } else {
        if (avail < 40 || (ip[0] >> 4) != 6) MALFORMED_FROM(l3);
        uint32_t plen = lt_load_be16(ip + 4);
        end = plen ? (uint64_t)l3 + 40 + plen : caplen; /* payload length 0: jumbogram, to the end of capture */
        if (end > caplen && !cut) MALFORMED_FROM(l3);
        if (strip == LT_STRIP_L3) RANGE(l3, end < caplen ? (uint32_t)end : caplen);
        hdr = 40;
        l4proto = ip[6];
        const uint32_t lim = (end < caplen ? (uint32_t)end : caplen) - l3; /* readable bytes of the packet */
        for (int n = 0;; n++) {
            uint32_t ext;
            if (l4proto != 0 && l4proto != 43 && l4proto != 44 && l4proto != 60 && l4proto != 51 && l4proto != 135)
                break;
            if (n == LT_IPV6_MAX_EXT || lim - hdr < 8) MALFORMED_FROM(l3 + hdr);
            if (l4proto == 44) { /* fragment header: fixed 8 bytes */
                uint32_t fo = lt_load_be16(ip + hdr + 2);
                if (fo & 0xFFF9) fl |= LT_FLAG_FRAGMENT; /* offset != 0 or M set (atomic fragments are not) */
                ext = 8;
                if (fo & 0xFFF8) nonfirst = 1;
            } else if (l4proto == 51) { /* AH: length in 4-byte units minus 2 (RFC 4302) */
                ext = ((uint32_t)ip[hdr + 1] + 2) * 4;
            } else { /* HBH, routing, destination options, mobility: 8-byte units minus 1 */
                ext = ((uint32_t)ip[hdr + 1] + 1) * 8;
            }
            if (ext > lim - hdr) MALFORMED_FROM(l3 + hdr);
            l4proto = ip[hdr];
            hdr += ext;
            if (nonfirst) break; /* what follows belongs to the fragmentable part */
        }
    }

    /* payload / rdma from here on. */
    const uint32_t l4 = l3 + hdr;
    const uint32_t stop = end < caplen ? (uint32_t)end : caplen; /* end of the hashed range when all is well */
    if (nonfirst) RANGE(l4, stop);

    if (l4proto == IPPROTO_TCP_) {
        if (stop - l4 < 13) {
            if (fl & LT_FLAG_FRAGMENT) RANGE(l4, stop); /* first fragment without a whole TCP header */
            MALFORMED_FROM(l4);
        }
        uint32_t doff = (uint32_t)(p[l4 + 12] >> 4) * 4;
        if (doff < 20 || doff > stop - l4) {
            if (doff >= 20 && (fl & LT_FLAG_FRAGMENT)) RANGE(l4, stop);
            MALFORMED_FROM(l4);
        }
        RANGE(l4 + doff, stop);
    }
    if (l4proto == IPPROTO_UDP_) {
        if (stop - l4 < 8) {
            if (fl & LT_FLAG_FRAGMENT) RANGE(l4, stop);
            MALFORMED_FROM(l4);
        }
        /* UDP length: 0 is allowed (jumbograms, RFC 2675; GSO); otherwise it must cover the
         * header and stay within the IP packet. The IP length decides where the data ends. */
        uint32_t ulen = lt_load_be16(p + l4 + 4);
        if (ulen != 0 && !(fl & LT_FLAG_FRAGMENT) && (ulen < 8 || ulen > end - l4)) MALFORMED_FROM(l4);
        const uint32_t data = l4 + 8;
        if (strip == LT_STRIP_RDMA && lt_load_be16(p + l4 + 2) == ROCE_V2_PORT && !(fl & LT_FLAG_FRAGMENT)) {
            /* RoCEv2: BTH, extended transport headers per opcode, payload, ICRC (4 bytes at the
             * end of the IP packet: not hashed, and absent from the range when cut by snaplen). */
            if (stop - data < IB_BTH_LEN) MALFORMED_FROM(data);
            uint32_t ext = ib_ext_len[p[data]];
            const uint32_t bth_end = data + IB_BTH_LEN;
            if (ext == 0xFF) MALFORMED_FROM(bth_end);
            const uint32_t pay = bth_end + ext;
            if (end - bth_end < ext + IB_ICRC_LEN) MALFORMED_FROM(bth_end);
            if (pay > stop) MALFORMED_FROM(bth_end);
            const uint64_t pend = end - IB_ICRC_LEN;
            RANGE(pay, pend < stop ? (uint32_t)pend : stop);
        }
        RANGE(data, stop);
    }
    /* ICMP, ICMPv6, ESP, no-next-header and every other protocol: what follows the IP header(s). */
    RANGE(l4, stop);
}

int lt_strip(int strip, uint32_t linktype, const uint8_t *frame, uint32_t caplen, uint32_t wire_len,
             uint32_t *offset, uint32_t *length, uint16_t *flags) {
    if (strip < LT_STRIP_FRAME || strip > LT_STRIP_RDMA) return LT_ERR_ARG;
    *flags = lt_strip_range(strip, linktype, frame, caplen, wire_len, offset, length);
    return LT_OK;
}
