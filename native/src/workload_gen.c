/*
 * Deterministic workload generator: a frame source (lt_source_ops) behind an lt_reader, so the
 * engine, `capture workload:SPEC` and `recompute workload:SPEC` treat it like a capture file.
 * Python (ledgertool/workload.py) validates the TOML spec and builds one header template per
 * flow; this file fills sizes, lengths, checksums, payload bytes and timestamps, batch by batch,
 * into one reader-owned buffer (nothing is allocated per frame). docs/workloads.md is the
 * normative description; ledgertool/reference.py (workload_frames) is an independent oracle.
 *
 * Derivation (all integers little-endian unless a protocol field says otherwise):
 *   key    = LE64(splitmix64 #1 of seed) || LE64(splitmix64 #2 of seed)        (16-byte SipHash key)
 *   s(f,k) = SipHash-1-3-64(key, LE64(flow index f) || LE64(frame index k within the flow))
 *   stream = xoshiro256** seeded with four splitmix64 outputs of s(f,k)
 *   u0     = first stream output: size entry = the one whose cumulative weight range holds
 *            ((u0 >> 32) * total_weight) >> 32
 *   payload bytes = the following stream outputs, each written little-endian, cut to length.
 * Interleaving: the k-th frame of flow f (n_f frames) sits at virtual time (2k+1) / (2 n_f);
 *   frames are emitted in increasing virtual time, ties by lower flow index (exact integer
 *   comparison), so every flow is spread evenly over the whole run.
 * Timestamp of global frame j: start_ns + floor(j * interframe_ps / 1000).
 * Per-frame fields: IPv4 total length, identification (template + k) and header checksum; IPv6
 *   payload length; UDP length and checksum (0 is sent as 0xFFFF); TCP sequence number
 *   (template + payload bytes of the flow's earlier frames) and checksum; RoCEv2 BTH PadCnt, PSN
 *   (template + k, mod 2^24), RETH DMA length, and the ICRC (CRC-32 over 8 bytes of 0xFF, the IP
 *   header with TOS/TTL/checksum (v6: traffic class/flow label/hop limit) set to ones, the UDP
 *   header with its checksum set to ones, the BTH with byte 4 set to ones, the rest of the
 *   headers, payload and pad; stored little-endian) as in IBTA Annex A17 and Linux rxe.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "ledgertool.h"
#include "lt_internal.h"

#define WL_BATCH_MAX 1024
#define WL_BUFFER_BYTES (4u << 20)

/* ---- CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320), slicing-by-8 ---- */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xFF];
}

/* Raw update (no pre/post inversion). */
static uint32_t crc_update(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint32_t a = lt_load_le32(p) ^ c, b = lt_load_le32(p + 4);
        c = crc_tab[7][a & 0xFF] ^ crc_tab[6][(a >> 8) & 0xFF] ^ crc_tab[5][(a >> 16) & 0xFF] ^
            crc_tab[4][a >> 24] ^ crc_tab[3][b & 0xFF] ^ crc_tab[2][(b >> 8) & 0xFF] ^
            crc_tab[1][(b >> 16) & 0xFF] ^ crc_tab[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xFF];
    return c;
}

/* ---- one's-complement sums (RFC 1071) ---- */
static uint64_t sum_bytes(const uint8_t *p, size_t n, uint64_t acc) {
    /* Big-endian 16-bit words; accumulate 32-bit big-endian words in 64 bits (no overflow for
     * frames far beyond LT_WL_MAX_FRAME). */
    while (n >= 4) {
        acc += lt_load_be32(p);
        p += 4;
        n -= 4;
    }
    if (n >= 2) {
        acc += lt_load_be16(p);
        p += 2;
        n -= 2;
    }
    if (n) acc += (uint64_t)p[0] << 8;
    return acc;
}

static uint16_t fold(uint64_t acc) {
    while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
    return (uint16_t)acc;
}

static inline void store_be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void store_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* ---- splitmix64 / xoshiro256** (Blackman & Vigna, prng.di.unimi.it) ---- */
static inline uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

typedef struct {
    uint64_t s[4];
} xoshiro;

static inline uint64_t xo_next(xoshiro *x) {
    uint64_t *s = x->s;
    uint64_t r = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return r;
}

/* ---- source state ---- */
typedef struct {
    uint8_t *header;
    uint32_t header_len, kind, l3, l4, dmalen, ipv6;
    uint64_t frames;
    lt_workload_size *sizes;
    uint32_t nsizes;
    uint64_t total_weight;
    /* template values the per-frame fields count from */
    uint16_t ip_id0;
    uint32_t tcp_seq0, psn0;
    uint64_t pseudo_sum;  /* addresses + protocol (pseudo-header without the length) */
    /* progress */
    uint64_t next_k;
    uint32_t tcp_seq;     /* running TCP sequence number */
} wl_flow;

typedef struct {
    wl_flow *flows;
    uint32_t nflows;
    uint8_t key[16];
    int64_t start_ns;
    uint64_t interframe_ps;
    uint64_t emitted;     /* global frame index of the next frame */
    uint32_t *heap;       /* flows with frames left, min-heap by virtual time */
    uint32_t heap_len;
    uint8_t *buf;
    size_t stride;
    size_t batch_cap;
} wl_src;

/* Flow a's next frame comes strictly before flow b's. */
static inline int wl_before(const wl_src *w, uint32_t a, uint32_t b) {
    const wl_flow *fa = &w->flows[a], *fb = &w->flows[b];
    unsigned __int128 x = (unsigned __int128)(2 * fa->next_k + 1) * fb->frames;
    unsigned __int128 y = (unsigned __int128)(2 * fb->next_k + 1) * fa->frames;
    return x < y || (x == y && a < b);
}

static void heap_down(wl_src *w, uint32_t i) {
    uint32_t *h = w->heap, n = w->heap_len;
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        if (l < n && wl_before(w, h[l], h[m])) m = l;
        if (l + 1 < n && wl_before(w, h[l + 1], h[m])) m = l + 1;
        if (m == i) return;
        uint32_t t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

static void heap_up(wl_src *w, uint32_t i) {
    uint32_t *h = w->heap;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!wl_before(w, h[i], h[p])) return;
        uint32_t t = h[i]; h[i] = h[p]; h[p] = t;
        i = p;
    }
}

static void wl_free(wl_src *w) {
    if (!w) return;
    if (w->flows)
        for (uint32_t i = 0; i < w->nflows; i++) {
            free(w->flows[i].header);
            free(w->flows[i].sizes);
        }
    free(w->flows);
    free(w->heap);
    free(w->buf);
    free(w);
}

static void wl_close(void *src) { wl_free(src); }

/* Build frame k of flow f into `p`; returns its captured length. */
static uint32_t wl_build(wl_src *w, uint32_t fi, wl_flow *f, uint64_t k, uint8_t *p) {
    uint8_t msg[16];
    lt_store_le64(msg, fi);
    lt_store_le64(msg + 8, k);
    uint64_t x = lt_siphash64(w->key, msg, 16, 1, 3);
    xoshiro xo;
    for (int i = 0; i < 4; i++) xo.s[i] = splitmix64(&x);
    uint64_t u0 = xo_next(&xo);
    const lt_workload_size *sz = f->sizes;
    if (f->nsizes > 1) {
        uint64_t r = ((u0 >> 32) * f->total_weight) >> 32;
        uint32_t i = 0;
        while (r >= sz[i].weight) r -= sz[i++].weight;
        sz += i;
    }
    uint32_t L = sz->frame_len, P = sz->payload_len, pad = sz->pad, H = f->header_len;
    memcpy(p, f->header, H);
    uint8_t *q = p + H;
    uint32_t left = P;
    while (left >= 8) {
        lt_store_le64(q, xo_next(&xo));
        q += 8;
        left -= 8;
    }
    if (left) {
        uint8_t t[8];
        lt_store_le64(t, xo_next(&xo));
        memcpy(q, t, left);
        q += left;
    }
    memset(q, 0, pad);
    q += pad;
    uint32_t icrc_at = (uint32_t)(q - p);
    uint32_t l4_end = icrc_at + (f->kind == LT_WL_ROCEV2 ? 4 : 0);
    if (l4_end < L) memset(p + l4_end, 0, L - l4_end); /* Ethernet padding */

    uint8_t *ip = p + f->l3, *l4 = p + f->l4;
    if (f->ipv6) {
        store_be16(ip + 4, (uint16_t)(l4_end - f->l3 - 40));
    } else {
        store_be16(ip + 2, (uint16_t)(l4_end - f->l3));
        store_be16(ip + 4, (uint16_t)(f->ip_id0 + k));
        ip[10] = ip[11] = 0;
        uint32_t ihl = (uint32_t)(ip[0] & 0x0F) * 4;
        store_be16(ip + 10, (uint16_t)~fold(sum_bytes(ip, ihl, 0)));
    }
    uint32_t l4_len = l4_end - f->l4;
    if (f->kind == LT_WL_TCP) {
        store_be32(l4 + 4, f->tcp_seq);
        f->tcp_seq += P;
        l4[16] = l4[17] = 0;
    } else {
        store_be16(l4 + 4, (uint16_t)l4_len);
        l4[6] = l4[7] = 0;
    }
    if (f->kind == LT_WL_ROCEV2) {
        uint8_t *bth = l4 + 8;
        bth[1] = (uint8_t)((bth[1] & 0xCF) | (pad << 4));
        uint32_t psn = (f->psn0 + (uint32_t)k) & 0xFFFFFFu;
        bth[9] = (uint8_t)(psn >> 16); bth[10] = (uint8_t)(psn >> 8); bth[11] = (uint8_t)psn;
        if (f->dmalen) store_be32(p + f->dmalen, P);
        /* ICRC: masked copy of IP + UDP + BTH, then the rest as is. */
        uint8_t m[8 + 40 + 8 + 12];
        uint32_t iplen = f->l4 - f->l3, n = 0;
        memset(m, 0xFF, 8);
        n = 8;
        memcpy(m + n, ip, iplen);
        if (f->ipv6) {
            m[n] |= 0x0F;            /* traffic class (high nibble in byte 0, low in byte 1) */
            m[n + 1] = 0xFF;         /* traffic class low nibble + flow label high nibble */
            m[n + 2] = m[n + 3] = 0xFF;
            m[n + 7] = 0xFF;         /* hop limit */
        } else {
            m[n + 1] = 0xFF;         /* TOS */
            m[n + 8] = 0xFF;         /* TTL */
            m[n + 10] = m[n + 11] = 0xFF;
        }
        n += iplen;
        memcpy(m + n, l4, 8 + 12);
        m[n + 6] = m[n + 7] = 0xFF;  /* UDP checksum */
        m[n + 8 + 4] = 0xFF;         /* BTH resv8a (FECN, BECN, reserved) */
        n += 8 + 12;
        uint32_t c = crc_update(0xFFFFFFFFu, m, n);
        c = crc_update(c, bth + 12, icrc_at - (f->l4 + 8 + 12));
        lt_store_le32(p + icrc_at, ~c);
    }
    /* L4 checksum over pseudo-header + segment. */
    uint64_t acc = f->pseudo_sum + l4_len;
    uint16_t cs = (uint16_t)~fold(sum_bytes(l4, l4_len, acc));
    if (f->kind == LT_WL_TCP) {
        store_be16(l4 + 16, cs);
    } else {
        store_be16(l4 + 6, cs ? cs : 0xFFFF);
    }
    return L;
}

static int wl_next(void *src, lt_frame *frames, size_t max, size_t *n, lt_reader_info *info) {
    wl_src *w = src;
    *n = 0;
    if (w->heap_len == 0) return LT_EOF;
    if (max > w->batch_cap) max = w->batch_cap;
    size_t i = 0;
    for (; i < max && w->heap_len; i++) {
        uint32_t fi = w->heap[0];
        wl_flow *f = &w->flows[fi];
        uint8_t *p = w->buf + i * w->stride;
        uint64_t k = f->next_k;
        uint32_t L = wl_build(w, fi, f, k, p);
        lt_frame *fr = &frames[i];
        fr->data = p;
        fr->offset = w->emitted;
        unsigned __int128 dt = (unsigned __int128)w->emitted * w->interframe_ps / 1000u;
        fr->ts_ns = w->start_ns + (int64_t)(uint64_t)dt;
        fr->caplen = fr->wire_len = L;
        fr->linktype = 1;
        fr->interface_id = 0;
        fr->rflags = 0;
        fr->section = 0;
        w->emitted++;
        f->next_k = k + 1;
        if (f->next_k == f->frames) {
            w->heap[0] = w->heap[--w->heap_len];
        }
        if (w->heap_len) heap_down(w, 0);
    }
    *n = i;
    return LT_OK;
}

static const lt_source_ops wl_ops = {wl_next, wl_close};

int lt_reader_open_workload(const lt_workload_spec *spec, lt_reader **out, char *err, size_t errlen) {
    *out = NULL;
    if (!spec || !spec->flows || spec->nflows == 0 || spec->nflows > LT_WL_MAX_FLOWS) {
        lt_errf(err, errlen, "workload: need 1..%u flows", LT_WL_MAX_FLOWS);
        return LT_ERR_ARG;
    }
    pthread_once(&crc_once, crc_init);
    wl_src *w = calloc(1, sizeof *w);
    if (!w) return LT_ERR_NOMEM;
    w->nflows = spec->nflows;
    w->start_ns = spec->start_ns;
    w->interframe_ps = spec->interframe_ps;
    uint64_t x = spec->seed;
    lt_store_le64(w->key, splitmix64(&x));
    lt_store_le64(w->key + 8, splitmix64(&x));
    w->flows = calloc(spec->nflows, sizeof *w->flows);
    w->heap = calloc(spec->nflows, sizeof *w->heap);
    if (!w->flows || !w->heap) goto nomem;
    uint32_t maxlen = 0;
    for (uint32_t i = 0; i < spec->nflows; i++) {
        const lt_workload_flow *s = &spec->flows[i];
        wl_flow *f = &w->flows[i];
        uint32_t H = s->header_len;
        int roce = s->kind == LT_WL_ROCEV2;
        uint32_t l4h = s->kind == LT_WL_TCP ? 20 : 8;
        if (s->kind < LT_WL_UDP || s->kind > LT_WL_ROCEV2 || !s->header || H > LT_WL_MAX_FRAME ||
            s->l3_offset + 20 > H || s->l4_offset < s->l3_offset + 20 || s->l4_offset + l4h + (roce ? 12u : 0u) > H ||
            (s->dmalen_offset && (!roce || s->dmalen_offset + 4 > H))) {
            lt_errf(err, errlen, "workload: flow %u: inconsistent header template", i);
            goto arg;
        }
        uint8_t ver = s->header[s->l3_offset] >> 4;
        uint32_t l3len = s->l4_offset - s->l3_offset;
        if (!((ver == 4 && l3len == (uint32_t)(s->header[s->l3_offset] & 0x0F) * 4 && l3len <= 40) ||
              (ver == 6 && l3len == 40))) {
            lt_errf(err, errlen, "workload: flow %u: IP header is neither IPv4 nor a bare IPv6 header", i);
            goto arg;
        }
        if (s->frames == 0 || s->nsizes == 0 || s->nsizes > LT_WL_MAX_SIZES || !s->sizes) {
            lt_errf(err, errlen, "workload: flow %u: needs frames > 0 and 1..%u sizes", i, LT_WL_MAX_SIZES);
            goto arg;
        }
        f->header = malloc(H);
        f->sizes = malloc(s->nsizes * sizeof *f->sizes);
        if (!f->header || !f->sizes) goto nomem;
        memcpy(f->header, s->header, H);
        memcpy(f->sizes, s->sizes, s->nsizes * sizeof *f->sizes);
        f->header_len = H;
        f->kind = s->kind;
        f->l3 = s->l3_offset;
        f->l4 = s->l4_offset;
        f->dmalen = s->dmalen_offset;
        f->ipv6 = ver == 6;
        f->frames = s->frames;
        f->nsizes = s->nsizes;
        for (uint32_t j = 0; j < s->nsizes; j++) {
            const lt_workload_size *z = &s->sizes[j];
            uint64_t end = (uint64_t)H + z->payload_len + z->pad + (roce ? 4 : 0);
            if (z->weight == 0 || z->frame_len > LT_WL_MAX_FRAME || end > z->frame_len || (!roce && z->pad) ||
                z->pad > 3 || (roce && (z->payload_len + z->pad) % 4) || end - s->l3_offset > 65535) {
                lt_errf(err, errlen, "workload: flow %u: size entry %u (frame %u, payload %u, pad %u) does not fit",
                        i, j, z->frame_len, z->payload_len, z->pad);
                goto arg;
            }
            f->total_weight += z->weight;
            if (z->frame_len > maxlen) maxlen = z->frame_len;
        }
        if (f->total_weight > 0xFFFFFFFFu) {
            lt_errf(err, errlen, "workload: flow %u: total weight exceeds 2^32-1", i);
            goto arg;
        }
        const uint8_t *ip = f->header + f->l3;
        f->ip_id0 = ver == 4 ? lt_load_be16(ip + 4) : 0;
        f->tcp_seq0 = f->tcp_seq = s->kind == LT_WL_TCP ? lt_load_be32(f->header + f->l4 + 4) : 0;
        f->psn0 = roce ? (lt_load_be32(f->header + f->l4 + 8 + 8) & 0xFFFFFFu) : 0;
        uint64_t ps = ver == 4 ? sum_bytes(ip + 12, 8, 0) : sum_bytes(ip + 8, 32, 0);
        f->pseudo_sum = ps + (s->kind == LT_WL_TCP ? 6 : 17);
        w->heap[w->heap_len] = i;
        w->heap_len++;
        heap_up(w, w->heap_len - 1);
    }
    w->stride = ((size_t)maxlen + 63) & ~(size_t)63;
    w->batch_cap = WL_BUFFER_BYTES / w->stride;
    if (w->batch_cap > WL_BATCH_MAX) w->batch_cap = WL_BATCH_MAX;
    if (w->batch_cap == 0) w->batch_cap = 1;
    w->buf = malloc(w->batch_cap * w->stride);
    if (!w->buf) goto nomem;
    lt_reader *r = lt_reader_from_source(&wl_ops, w, LT_FMT_WORKLOAD);
    if (!r) goto nomem;
    *out = r;
    return LT_OK;
nomem:
    wl_free(w);
    lt_errf(err, errlen, "workload: out of memory");
    return LT_ERR_NOMEM;
arg:
    wl_free(w);
    return LT_ERR_ARG;
}

/* ---- pcap writer (any reader) ---- */
int lt_reader_write_pcap(lt_reader *r, const char *path, uint64_t *frames_written, char *err, size_t errlen) {
    if (frames_written) *frames_written = 0;
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        lt_errf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return LT_ERR_IO;
    }
    char *vbuf = malloc(1u << 20);
    if (vbuf) setvbuf(fp, vbuf, _IOFBF, 1u << 20);
    lt_frame frames[256];
    size_t n = 0;
    uint64_t written = 0;
    int st, rc = LT_OK, header_done = 0;
    uint32_t linktype = 0;
    while ((st = lt_reader_next(r, frames, 256, &n)) == LT_OK) {
        for (size_t i = 0; i < n; i++) {
            const lt_frame *f = &frames[i];
            if (!header_done) {
                linktype = f->linktype;
                uint8_t h[24];
                lt_store_le32(h, 0xA1B23C4Du);
                lt_store_le16(h + 4, 2);
                lt_store_le16(h + 6, 4);
                lt_store_le32(h + 8, 0);
                lt_store_le32(h + 12, 0);
                lt_store_le32(h + 16, 262144);
                lt_store_le32(h + 20, linktype);
                fwrite(h, 1, 24, fp);
                header_done = 1;
            } else if (f->linktype != linktype) {
                lt_errf(err, errlen, "%s: frame %llu has link type %u, the file's is %u (pcap holds one)", path,
                        (unsigned long long)written, f->linktype, linktype);
                rc = LT_ERR_ARG;
                goto done;
            }
            if (f->ts_ns < 0) {
                lt_errf(err, errlen, "%s: frame %llu: timestamp before 1970 cannot be written to pcap", path,
                        (unsigned long long)written);
                rc = LT_ERR_ARG;
                goto done;
            }
            uint8_t h[16];
            lt_store_le32(h, (uint32_t)(f->ts_ns / 1000000000));
            lt_store_le32(h + 4, (uint32_t)(f->ts_ns % 1000000000));
            lt_store_le32(h + 8, f->caplen);
            lt_store_le32(h + 12, f->wire_len);
            fwrite(h, 1, 16, fp);
            if (f->caplen) fwrite(f->data, 1, f->caplen, fp);
            written++;
        }
    }
    if (st != LT_EOF) {
        lt_reader_info info;
        lt_reader_get_info(r, &info);
        lt_errf(err, errlen, "%s", info.message[0] ? info.message : "read error");
        rc = st;
        goto done;
    }
    if (!header_done) { /* no frames: still a valid, empty pcap */
        lt_reader_info info;
        lt_reader_get_info(r, &info);
        uint8_t h[24];
        lt_store_le32(h, 0xA1B23C4Du);
        lt_store_le16(h + 4, 2);
        lt_store_le16(h + 6, 4);
        memset(h + 8, 0, 8);
        lt_store_le32(h + 16, 262144);
        lt_store_le32(h + 20, info.linktype ? info.linktype : 1);
        fwrite(h, 1, 24, fp);
    }
done:
    if (fflush(fp) != 0 || ferror(fp)) {
        if (rc == LT_OK) {
            lt_errf(err, errlen, "%s: write failed: %s", path, strerror(errno));
            rc = LT_ERR_IO;
        }
    }
    if (fclose(fp) != 0 && rc == LT_OK) {
        lt_errf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        rc = LT_ERR_IO;
    }
    free(vbuf);
    if (frames_written) *frames_written = written;
    return rc;
}
