/*
 * Deterministic workload generator: a frame source (lt_source_ops) behind an lt_reader, so the
 * engine, `capture workload:SPEC` and `recompute workload:SPEC` treat it like a capture file.
 * Python (ledgertool/source/workload.py) validates the TOML spec and builds one header template per
 * flow; this file fills sizes, lengths, checksums, payload bytes and timestamps, batch by batch,
 * into one reader-owned buffer (nothing is allocated per frame). docs/workloads.md is the
 * normative description; ledgertool/digest/reference.py (workload_*) is an independent oracle.
 *
 * Derivation (all integers little-endian unless a protocol field says otherwise):
 *   key    = LE64(splitmix64 #1 of seed) || LE64(splitmix64 #2 of seed)        (16-byte SipHash key)
 *   fs(f)  = SipHash-1-3-64(key, LE64(flow index f))                        (once per flow)
 *   s(f,k) = mix64(fs(f) + (k+1) * 0xD1B54A32D192ED03)   (k: frame index within the flow)
 *   word i of frame (f,k) = mix64(s(f,k) + (i+1) * gamma)            (splitmix64 gamma 0x9E37..7C15)
 *   pool   = 8192 words: pool[i] = mix64(SipHash-1-3-64(key, LE64(2^64-1)) + (i+1) * gamma)
 *   size entry = the one whose cumulative weight range holds ((word 0 >> 32) * total_weight) >> 32
 *   payload word j = pool[(word 1 mod 8192 + j) mod 8192] XOR word 2, written little-endian, the
 *            last one cut to the payload length. (A window of a 64 KiB seed-derived pool, masked
 *            per frame: a few operations per 8 bytes, so generating outruns digesting.)
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
#define WL_POOL_WORDS 8192u        /* 64 KiB of seed-derived words the payloads are cut from */

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

/* ---- one's-complement sums (RFC 1071) ----
 * Summed in host (little-endian) word order, 8 bytes at a time; RFC 1071 section 2(B): the sum is
 * byte-order independent, so folding and complementing give the checksum's bytes as stored in
 * host order (see store_sum). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "workload_gen.c assumes a little-endian host (x86-64, arm64)"
#endif
static inline uint64_t sum_bytes(const uint8_t *p, size_t n, uint64_t acc) {
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        acc += (v & 0xFFFFFFFFu) + (v >> 32);
        p += 8;
        n -= 8;
    }
    if (n >= 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        acc += v;
        p += 4;
        n -= 4;
    }
    if (n >= 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        acc += v;
        p += 2;
        n -= 2;
    }
    if (n) acc += p[0]; /* odd byte: high byte of a big-endian word = low byte of a host word */
    return acc;
}

static inline uint16_t fold(uint64_t acc) {
    acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
    acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
    acc = (acc & 0xFFFF) + (acc >> 16);
    acc = (acc & 0xFFFF) + (acc >> 16);
    acc = (acc & 0xFFFF) + (acc >> 16);
    return (uint16_t)acc;
}

/* A big-endian 16-bit protocol value as a host-order summand. */
static inline uint64_t be_term(uint32_t v) { return (uint64_t)(uint16_t)((v >> 8) | (v << 8)); }

/* Store a complemented host-order sum: its bytes are the checksum field as sent. */
static inline void store_sum(uint8_t *p, uint16_t host) { memcpy(p, &host, 2); }

static inline void store_be16(uint8_t *p, uint16_t v) {
    v = __builtin_bswap16(v);
    memcpy(p, &v, 2);
}
static inline void store_be32(uint8_t *p, uint32_t v) {
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}

/* ---- splitmix64 (Steele, Lea & Flood 2014; prng.di.unimi.it/splitmix64.c) ----
 * Used as a counter-based stream: output i of the stream with state s is mix64(s + (i+1) * gamma),
 * so the words of a payload are independent of each other (the loop pipelines / vectorises). */
#define SM_GAMMA 0x9E3779B97F4A7C15ULL
#define FRAME_GAMMA 0xD1B54A32D192ED03ULL /* odd; steps the per-frame state within a flow */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline uint64_t splitmix64(uint64_t *x) { return mix64(*x += SM_GAMMA); }

/* ---- source state ---- */
typedef struct {
    uint8_t *header;
    uint32_t header_len, kind, l3, l4, dmalen, ipv6;
    uint64_t frames;
    lt_workload_size *sizes;
    uint32_t nsizes;
    uint64_t total_weight;
    uint64_t fseed;       /* fs(f): SipHash-1-3-64 of the flow index under the seed key */
    /* template values the per-frame fields count from */
    uint16_t ip_id0;
    uint32_t tcp_seq0, psn0;
    uint64_t pseudo_sum;  /* addresses + protocol (pseudo-header without the length) */
    uint64_t ip_sum;      /* IPv4 header with total length, id and checksum zeroed */
    uint64_t l4_sum;      /* template bytes [l4, header_len) with the per-frame fields zeroed */
    /* progress */
    uint64_t next_k;
    uint32_t tcp_seq;     /* running TCP sequence number */
} wl_flow;

typedef struct {
    wl_flow *flows;
    uint32_t nflows;
    uint8_t key[16];
    uint64_t pool[WL_POOL_WORDS];
    int64_t start_ns;
    uint64_t interframe_ps;
    uint64_t emitted;     /* global frame index of the next frame */
    int64_t ts_ns;        /* its timestamp: start_ns + floor(emitted * interframe_ps / 1000) ... */
    uint64_t ts_rem_ps;   /* ... and the remainder of that division, in ps (< 1000) */
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
/* Build frame k of flow f into `p`; returns its captured length. Checksums are computed from
 * per-flow template sums plus the fields that change, never by reading back bytes just written
 * (a wide load over narrow fresh stores stalls store-to-load forwarding). */
static uint32_t wl_build(const wl_src *w, wl_flow *f, uint64_t k, uint8_t *p) {
    uint64_t x = mix64(f->fseed + (k + 1) * FRAME_GAMMA);
    uint64_t u0 = mix64(x + SM_GAMMA);
    const lt_workload_size *sz = f->sizes;
    if (f->nsizes > 1) {
        uint64_t r = ((u0 >> 32) * f->total_weight) >> 32;
        uint32_t i = 0;
        while (r >= sz[i].weight) r -= sz[i++].weight;
        sz += i;
    }
    uint32_t L = sz->frame_len, P = sz->payload_len, pad = sz->pad, H = f->header_len;
    if (H <= 64)
        memcpy(p, f->header, 64); /* fixed size: inlined; header buffer and stride are >= 64 bytes */
    else
        memcpy(p, f->header, H);
    uint8_t *q = p + H;
    uint32_t words = P / 8, left = P % 8;
    uint64_t off = mix64(x + 2 * SM_GAMMA) % WL_POOL_WORDS, mask = mix64(x + 3 * SM_GAMMA), psum = 0;
    const uint64_t *pool = w->pool;
    uint32_t i = 0;
    while (i < words) { /* at most two runs: the pool wraps around once (P < WL_POOL_WORDS * 8) */
        uint32_t run = words - i, room = (uint32_t)(WL_POOL_WORDS - off);
        if (run > room) run = room;
        const uint64_t *src = pool + off;
        uint8_t *dst = q + 8 * (size_t)i;
        for (uint32_t j = 0; j < run; j++) {
            uint64_t v = src[j] ^ mask;
            memcpy(dst + 8 * (size_t)j, &v, 8); /* little-endian host */
            psum += (v & 0xFFFFFFFFu) + (v >> 32);
        }
        i += run;
        off = (off + run) % WL_POOL_WORDS;
    }
    q += 8 * (size_t)words;
    if (left) {
        uint64_t v = (pool[off] ^ mask) & ((1ULL << (8 * left)) - 1);
        memcpy(q, &v, left);
        psum += (v & 0xFFFFFFFFu) + (v >> 32);
        q += left;
    }
    if (pad) memset(q, 0, pad);
    q += pad;
    uint32_t icrc_at = (uint32_t)(q - p);
    uint32_t l4_end = icrc_at + (f->kind == LT_WL_ROCEV2 ? 4 : 0);
    if (l4_end < L) memset(p + l4_end, 0, L - l4_end); /* Ethernet padding */

    uint8_t *ip = p + f->l3, *l4 = p + f->l4;
    if (f->ipv6) {
        store_be16(ip + 4, (uint16_t)(l4_end - f->l3 - 40));
    } else {
        uint16_t tot = (uint16_t)(l4_end - f->l3), id = (uint16_t)(f->ip_id0 + k);
        store_be16(ip + 2, tot);
        store_be16(ip + 4, id);
        store_sum(ip + 10, (uint16_t)~fold(f->ip_sum + be_term(tot) + be_term(id)));
    }
    uint32_t l4_len = l4_end - f->l4;
    /* pseudo-header (addresses, protocol, L4 length) + template + changing fields + payload */
    uint64_t acc = f->pseudo_sum + be_term(l4_len) + f->l4_sum + psum;
    if (f->kind == LT_WL_TCP) {
        store_be32(l4 + 4, f->tcp_seq);
        acc += be_term(f->tcp_seq >> 16) + be_term(f->tcp_seq & 0xFFFF);
        f->tcp_seq += P;
    } else {
        store_be16(l4 + 4, (uint16_t)l4_len);
        acc += be_term(l4_len);
    }
    if (f->kind == LT_WL_ROCEV2) {
        uint8_t *bth = l4 + 8;
        bth[1] = (uint8_t)((bth[1] & 0xCF) | (pad << 4));
        uint32_t psn = (f->psn0 + (uint32_t)k) & 0xFFFFFFu;
        bth[9] = (uint8_t)(psn >> 16);
        bth[10] = (uint8_t)(psn >> 8);
        bth[11] = (uint8_t)psn;
        /* host-order words (bth+8, bth+9) and (bth+10, bth+11); bth+8 is in the template sum */
        acc += ((uint64_t)pad << 12) + ((uint64_t)(psn >> 16) << 8) + ((psn >> 8) & 0xFF) + ((uint64_t)(psn & 0xFF) << 8);
        if (f->dmalen) {
            store_be32(p + f->dmalen, P);
            acc += be_term(P >> 16) + be_term(P & 0xFFFF);
        }
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
        c = ~crc_update(c, bth + 12, icrc_at - (f->l4 + 8 + 12));
        lt_store_le32(p + icrc_at, c);
        acc += (c & 0xFFFF) + (c >> 16); /* icrc_at - l4 is even */
    }
    uint16_t cs = (uint16_t)~fold(acc);
    if (f->kind == LT_WL_TCP) {
        store_sum(l4 + 16, cs);
    } else {
        store_sum(l4 + 6, cs ? cs : 0xFFFF); /* UDP: a computed 0 is sent as all ones (RFC 768) */
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
        uint32_t L = wl_build(w, f, k, p);
        lt_frame *fr = &frames[i];
        fr->data = p;
        fr->offset = w->emitted;
        fr->ts_ns = w->ts_ns;
        fr->caplen = fr->wire_len = L;
        fr->linktype = 1;
        fr->interface_id = 0;
        fr->rflags = 0;
        fr->section = 0;
        w->emitted++;
        w->ts_ns += (int64_t)(w->interframe_ps / 1000u);
        w->ts_rem_ps += w->interframe_ps % 1000u;
        if (w->ts_rem_ps >= 1000u) {
            w->ts_rem_ps -= 1000u;
            w->ts_ns++;
        }
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
    w->ts_ns = spec->start_ns;
    uint64_t x = spec->seed;
    lt_store_le64(w->key, splitmix64(&x));
    lt_store_le64(w->key + 8, splitmix64(&x));
    {
        uint8_t msg[8];
        lt_store_le64(msg, UINT64_MAX);
        uint64_t ps = lt_siphash64(w->key, msg, 8, 1, 3);
        for (uint32_t i = 0; i < WL_POOL_WORDS; i++) w->pool[i] = mix64(ps + (uint64_t)(i + 1) * SM_GAMMA);
    }
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
        f->header = calloc(1, H > 64 ? H : 64);
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
        uint8_t msg[8];
        lt_store_le64(msg, i);
        f->fseed = lt_siphash64(w->key, msg, 8, 1, 3);
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
        f->pseudo_sum = ps + be_term(s->kind == LT_WL_TCP ? 6 : 17);
        if ((H - f->l4) % 2 || (f->dmalen && (f->dmalen - f->l4) % 2)) {
            lt_errf(err, errlen, "workload: flow %u: L4 header or RETH at an odd offset", i);
            goto arg;
        }
        /* Template sums with the per-frame fields zeroed (in a scratch copy). */
        uint8_t t[LT_WL_MAX_FRAME];
        memcpy(t, f->header, H);
        if (ver == 4) {
            memset(t + f->l3 + 2, 0, 4);    /* total length, identification */
            memset(t + f->l3 + 10, 0, 2);   /* header checksum */
            f->ip_sum = sum_bytes(t + f->l3, l3len, 0);
        }
        uint8_t *tl4 = t + f->l4;
        if (s->kind == LT_WL_TCP) {
            memset(tl4 + 4, 0, 4);          /* sequence number */
            memset(tl4 + 16, 0, 2);         /* checksum */
        } else {
            memset(tl4 + 4, 0, 4);          /* length, checksum */
        }
        if (roce) {
            tl4[9] &= 0xCF;                 /* BTH PadCnt */
            memset(tl4 + 17, 0, 3);         /* BTH PSN */
            if (f->dmalen) memset(t + f->dmalen, 0, 4);
        }
        f->l4_sum = sum_bytes(tl4, H - f->l4, 0);
        w->heap[w->heap_len] = i;
        w->heap_len++;
        heap_up(w, w->heap_len - 1);
    }
    {   /* timestamps must fit: ts_ns advances by interframe_ps / 1000 (+ carry) per frame emitted,
         * the last time after the last frame */
        unsigned __int128 total = 0;
        for (uint32_t i = 0; i < w->nflows; i++) total += w->flows[i].frames;
        unsigned __int128 span;
        if (__builtin_mul_overflow(total, (unsigned __int128)spec->interframe_ps, &span) ||
            span / 1000u > (unsigned __int128)INT64_MAX - (unsigned __int128)(spec->start_ns < 0 ? 0 : spec->start_ns)) {
            lt_errf(err, errlen, "workload: the last frame's timestamp (start_ns + frames x interframe) is past "
                    "2^63 - 1 ns");
            goto arg;
        }
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
