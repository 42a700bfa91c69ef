/*
 * Private to the capture-file reader (reader.c, reader_pcap.c, reader_pcapng.c, reader_erf.c): the
 * lt_reader
 * itself, the interface each capture format implements, and the bounded-read helpers the
 * format parsers share. The policies (what is truncated, what is corrupt) are at the top of
 * reader.c and of each format's file.
 */
#ifndef LT_READER_FORMAT_H
#define LT_READER_FORMAT_H

#include <stdarg.h>

#include "lt_internal.h"

#define LT_MAX_CAPLEN (256u << 20)      /* pcap: a caplen above this is corrupt, always */
#define LT_PLAUSIBLE_CAPLEN 262144u     /* pcap: floor of "plausible cut packet" (with snaplen) */
#define LT_MAX_BLOCK (256u << 20)       /* pcapng: a block above this is corrupt, always */
#define LT_MAX_IFACES (1u << 20)        /* pcapng: interfaces per section */

enum { LT_LENS_IN_ORDER, LT_LENS_SWAPPED, LT_LENS_MAYBE_SWAPPED };

typedef struct {
    uint32_t linktype;
    uint32_t snaplen;
    int tsres_binary;   /* 0: unit 10^-exp s, 1: unit 2^-exp s */
    uint32_t tsres_exp;
    int64_t tsoffset;   /* seconds */
    uint64_t block_off; /* the IDB's file offset and length (lt_reader_pcapng_context) */
    uint32_t block_len;
} lt_iface;

struct lt_reader {
    const uint8_t *map;  /* a file: its map; a stream: the window of bytes read and not yet dropped */
    size_t size;         /* bytes in map */
    size_t pos;          /* next record/block to read (in map) */
    size_t populated;    /* a file: its map's page tables are filled up to here (reader.c, file_next) */
    uint64_t base;       /* offset in the file/stream of map[0]: 0 for a file, grows as a stream slides */
    int be;              /* pcap file / current pcapng section is big-endian */
    int state;           /* 0 while reading; LT_EOF or an LT_ERR_* once done */
    /* pcap */
    size_t rec_hdr;      /* 16, or 24 for the modified format */
    uint32_t frac_unit;  /* ns per fraction unit: 1000 or 1 */
    uint32_t snaplen;
    uint32_t linktype;
    uint32_t plausible;  /* max(min(snaplen, LT_MAX_CAPLEN), LT_PLAUSIBLE_CAPLEN) */
    int lenswap;         /* LT_LENS_*: caplen and wire length in pre-2.3 order (reader_pcap.c) */
    /* pcapng */
    uint32_t section;    /* 0-based index of the current section */
    int have_first_if;
    lt_iface *ifs;
    uint32_t nifs, cap_ifs;
    uint64_t shb_off;    /* the current section's SHB: file offset and length */
    uint32_t shb_len;
    int pausing;         /* lt_reader_next_before: stop before a packet block at pause_before or later */
    uint64_t pause_before;
    int paused;          /* ... and it did (r->pos is that block) */
    /* ERF */
    uint64_t erf_gap_done; /* 1 + file offset of the record whose drops were handed out already */
    int erf_losses;        /* lt_reader_declare_losses: loss counters as LT_RF_GAP pseudo-frames */
    lt_reader_info info;
    const struct lt_format *fmt;  /* the capture format (files); NULL for other sources */
    /* A stream (lt_reader_open_fd): map is a malloc'd window of `cap` bytes over fd (reader.c). */
    int stream;
    int fd;
    int stream_eof;      /* read() returned 0: the window holds the rest of the stream */
    size_t cap;
    int undecided;       /* the last verdict depended on where map ends (pcap: a caplen past the end) */
    /* Other frame sources (workload generator, live interfaces) plug in here; NULL for files. */
    const lt_source_ops *ops;
    void *src;
};

/* One capture format. reader.c probes the formats in its table with the file's first bytes (4 or
 * more; a format with no magic number, ERF, looks at up to LT_PROBE_BYTES); the first that claims
 * them opens the file. */
#define LT_PROBE_BYTES 4096u
typedef struct lt_format {
    /* 1 when the n bytes at head (n >= 4) begin a file of this format */
    int (*probe)(const uint8_t *head, size_t n);
    /* Read the file header (the map holds r->size >= 4 bytes): set info.format, the version,
     * snaplen and link type, and r->pos to the first record. LT_OK, or an LT_ERR_* with the
     * reason (no file name) in r->info.message. */
    int (*open)(lt_reader *r);
    /* Hand out up to `max` frames from r->pos on; fewer only when reading ends (r->state set:
     * LT_EOF, with info.truncated for a cut record, or an LT_ERR_* naming the byte offset). */
    size_t (*next)(lt_reader *r, lt_frame *out, size_t max);
} lt_format;

extern const lt_format lt_format_pcap;    /* reader_pcap.c */
extern const lt_format lt_format_pcapng;  /* reader_pcapng.c */
extern const lt_format lt_format_erf;     /* reader_erf.c */

/* Integers in the file's (or the current pcapng section's) byte order; and how reading ends:
 * set_truncated (LT_EOF, every whole record handed out) or set_error (sticky LT_ERR_*). Both take
 * `off` in map and store it as a file offset; messages print AT(r, pos), the file offset too. */
#define AT(r, pos) ((size_t)((r)->base + (pos)))
static inline uint16_t rd16(const lt_reader *r, const uint8_t *p) {
    return r->be ? lt_load_be16(p) : lt_load_le16(p);
}
static inline uint32_t rd32(const lt_reader *r, const uint8_t *p) {
    return r->be ? lt_load_be32(p) : lt_load_le32(p);
}

static inline void set_truncated(lt_reader *r, uint64_t off, uint64_t have, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void set_truncated(lt_reader *r, uint64_t off, uint64_t have, const char *fmt, ...) {
    r->state = LT_EOF;
    r->info.truncated = 1;
    r->info.truncated_offset = r->base + off;
    r->info.truncated_bytes = have;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->info.message, sizeof r->info.message, fmt, ap);
    va_end(ap);
}

static inline int set_error(lt_reader *r, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int set_error(lt_reader *r, int code, uint64_t off, const char *fmt, ...) {
    r->state = code;
    r->info.error = code;
    r->info.error_offset = r->base + off;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->info.message, sizeof r->info.message, fmt, ap);
    va_end(ap);
    return code;
}

#endif
