/*
 * ledgertool native engine: the one public C API, in the order the data flows:
 *   1. sources    frames from capture files, the workload generator and plug-in sources
 *   2. strip      which bytes of a frame are hashed
 *   3. digest     keyed digest algorithms and the CPU paths they run on
 *   4. engine     reader -> strip -> digest -> records, in batches
 *   5. records    the fixed-size on-disk record and its flags
 *   5b. windows   window records: a keyed multiset hash and an invertible sketch per time window
 *   6. merkle     leaf hashes over records and the tree hash over leaves; raw record files (v2)
 *   6b. segment   the open-segment writer: leaves, block MACs and seal counters at append
 *   7. live       live capture from an interface, and replay of a capture onto one
 *   8. process    hardening before secret keys are loaded
 * Measurement and test-only entry points are in ledgertool_testing.h.
 *
 * cffi reads only the block between the CDEF BEGIN / CDEF END markers (plain declarations,
 * no preprocessor logic), so that block must stay parseable by cffi's cdef().
 *
 * Conventions: every function returns an LT_* status; errors fill a caller-provided message
 * buffer (one line, naming the byte offset where it applies). Nothing here calls back into Python.
 * All multi-byte integers written to disk are little-endian.
 */
#ifndef LEDGERTOOL_H
#define LEDGERTOOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CDEF BEGIN */

/* ---- ABI version ----
 * Raised by one whenever a CDEF block changes (this header's, ledgertool_testing.h's, or those of
 * the optional modules, native/bypass/source_*.h): the Python binding (ledgertool/_binding.py,
 * ABI_VERSION) refuses a compiled module built from other declarations, so a stale build after
 * `git pull` is one line asking for a rebuild rather than an AttributeError deep inside a command.
 * tests/test_binding.py pins the blocks' digest to it. */
#define LT_ABI_VERSION 4

/* ---- status codes ---- */
#define LT_OK 0
#define LT_EOF 1              /* no more frames; check lt_reader_info for a truncated tail */
#define LT_ERR_IO -1          /* open/stat/mmap failed */
#define LT_ERR_FORMAT -2      /* not a capture file we know (magic), or unsupported version */
#define LT_ERR_CORRUPT -3     /* structure inconsistent at info.error_offset */
#define LT_ERR_ARG -4         /* bad argument (unknown algorithm, key size, ...) */
#define LT_ERR_NOMEM -5

/* ======== 1. sources: an lt_reader hands out frames (native/src/reader*.c, workload_gen.c,
 * source_plugin.c; live interfaces in section 7) ======== */

/* ---- capture file formats (lt_reader_info.format) ---- */
#define LT_FMT_PCAP_US 1       /* classic pcap, microsecond timestamps */
#define LT_FMT_PCAP_NS 2       /* classic pcap, nanosecond timestamps */
#define LT_FMT_PCAP_MODIFIED 3 /* Kuznetzov modified pcap (0xA1B2CD34) */
#define LT_FMT_PCAPNG 4
#define LT_FMT_WORKLOAD 5      /* frames from a deterministic workload generator */
#define LT_FMT_LIVE 6          /* frames from a live interface */
#define LT_FMT_ERF 7           /* Endace ERF records (no file header) */

/* ---- per-frame reader flags (lt_frame.rflags) ---- */
#define LT_RF_NO_TIMESTAMP 1        /* pcapng Simple Packet Block: ts_ns is 0 */
#define LT_RF_CAPLEN_GT_SNAPLEN 2   /* caplen exceeds the file/interface snaplen; hashed in full */
#define LT_RF_CAPLEN_GT_WIRELEN 4   /* caplen exceeds the wire length */
#define LT_RF_BIG_ENDIAN 8          /* record came from a big-endian file or section */
#define LT_RF_GAP 16                /* not a frame: a live source noticed `wire_len` frames dropped
                                       (data NULL/empty, caplen 0, ts_ns = when it noticed); the
                                       engine writes a GAP record with aux = wire_len */

/* One frame as the reader hands it out: a zero-copy view into the mmap'd file. */
typedef struct {
    const uint8_t *data;    /* caplen bytes, valid until lt_reader_close */
    uint64_t offset;        /* byte offset of the record/block header in the file */
    int64_t ts_ns;          /* ns since the Unix epoch (0 when LT_RF_NO_TIMESTAMP) */
    uint32_t caplen;        /* captured length, bytes */
    uint32_t wire_len;      /* original (wire) length, bytes */
    uint32_t linktype;      /* LINKTYPE_* value (upper 16 bits of the pcap field masked off) */
    uint32_t interface_id;  /* pcapng interface index within its section; 0 for pcap */
    uint32_t rflags;        /* LT_RF_* */
    uint32_t section;       /* pcapng section index (0-based); 0 for pcap */
} lt_frame;

/* What the reader knows about the file and how reading ended. */
typedef struct {
    int format;                 /* LT_FMT_* */
    uint32_t version_major;
    uint32_t version_minor;
    uint32_t snaplen;           /* pcap global snaplen; pcapng: of the first interface */
    uint32_t linktype;          /* pcap global link type; pcapng: of the first interface */
    uint32_t sections;          /* pcapng sections seen */
    uint32_t interfaces;        /* pcapng interfaces seen (all sections) */
    uint64_t file_size;         /* bytes */
    uint64_t frames;            /* frames handed out so far */
    uint64_t skipped_blocks;    /* pcapng blocks skipped by length (unknown, NRB, ISB, custom, ...);
                                   ERF PAD and META records */
    uint64_t damaged_blocks;    /* pcapng blocks read past whose options or fixed part are damaged
                                   (wiretap stops at them); the first is named in `warning` */
    uint64_t damaged_offset;    /* byte offset of the first of them */
    char warning[192];          /* one line naming the first damaged block, or empty */
    int truncated;              /* 1: the file ends inside a record; every whole record was delivered */
    uint64_t truncated_offset;  /* byte offset of the cut record */
    uint64_t truncated_bytes;   /* bytes present of the cut record */
    int error;                  /* sticky LT_ERR_* once reading failed, else 0 */
    uint64_t error_offset;      /* byte offset of the bad header/block */
    char message[256];          /* one line: what ended reading (error or truncation) */
} lt_reader_info;

typedef struct lt_reader lt_reader;

/* Open and mmap a capture file; detect its format by magic number only.
 * Returns LT_OK, LT_ERR_IO, LT_ERR_FORMAT or LT_ERR_CORRUPT (message in err). */
int lt_reader_open(const char *path, lt_reader **out, char *err, size_t errlen);

/* Hand out up to `max` frames in order. Returns LT_OK with *n > 0, LT_EOF with *n == 0 at the
 * end (possibly after a truncated tail, see info), or an LT_ERR_* with *n == 0 once a corrupt
 * structure is reached (the frames before it were all handed out by earlier calls), or LT_ERR_IO
 * when the file shrank while it was read (a SIGBUS on the map, caught: info names the byte). */
int lt_reader_next(lt_reader *r, lt_frame *frames, size_t max, size_t *n);

/* Read a capture from a stream (a pipe, standard input): the same formats and policies as
 * lt_reader_open, over a window of the stream in memory (4 MiB, growing to the largest record,
 * at most 256 MiB + 4 MiB). `prefix` holds prefix_len bytes already read from fd (the caller peeked
 * at them); they come first. The reader owns fd and closes it. Frames are valid until the next
 * lt_reader_next (the engine reads no batch ahead); offsets count bytes of the stream; info.file_size
 * counts the bytes read so far. A read error is LT_ERR_IO naming the byte offset. `name` names the
 * stream in messages. Returns as lt_reader_open (LT_ERR_FORMAT for an empty stream). */
int lt_reader_open_fd(int fd, const char *name, const uint8_t *prefix, size_t prefix_len, lt_reader **out,
                      char *err, size_t errlen);

void lt_reader_get_info(const lt_reader *r, lt_reader_info *info);

/* An ERF file's loss counters handed out as LT_RF_GAP pseudo-frames (on: a capture declares them in
 * its ledger) or not (off, the default: a reader that compares frames, such as recompute, sees the
 * frames only, as the ledger's frame records are). Before the first lt_reader_next; LT_OK, or
 * LT_ERR_ARG for no reader. */
int lt_reader_declare_losses(lt_reader *r, int on);
void lt_reader_close(lt_reader *r);

/* ---- pcapng chunks (ledgertool.reconcile.cluster cuts a large pcapng file at packet blocks) ----
 * lt_reader_next for a pcapng file that stops before the first packet block (EPB, SPB, obsolete
 * PB) whose offset is `before` or more: the blocks ahead of it (SHB, IDB, any other) are read, and
 * *paused = 1 with LT_OK and *n frames (possibly 0) handed out before it; a later call with a
 * larger `before`, or lt_reader_next, reads it (its framing, length and trailer, was checked: a
 * bad one ends reading there instead; the same `before` pauses there again). Otherwise as
 * lt_reader_next (*paused = 0). LT_ERR_ARG for any other reader (a stream, pcap, a source). */
int lt_reader_next_before(lt_reader *r, lt_frame *frames, size_t max, uint64_t before, size_t *n, int *paused);

/* pcapng: what a reader of the blocks from the next one on needs in front of them to read them as
 * this reader does: the (file offset, length) pair of the current Section Header Block, then of
 * every Interface Description Block of its section read so far, in file order, into ranges
 * (2 * max uint64). *n = the pairs needed (1 + interfaces), *next = the next block's file offset
 * (after reading ended: the corrupt or cut-short block's, or the file size). LT_OK; LT_ERR_ARG when
 * r is not a mapped pcapng file (*n = 0), or when max < *n (ranges untouched; *n and *next set). */
int lt_reader_pcapng_context(const lt_reader *r, uint64_t *ranges, size_t max, size_t *n, uint64_t *next);

/* Copy the bytes of `n` frames handed out by r, back to back, into dst (dst_len bytes, at least
 * the sum of their caplens). LT_OK; LT_ERR_ARG when dst is too small; LT_ERR_IO (sticky, message
 * and error_offset in info) when the file shrank under them. */
int lt_reader_copy_frames(lt_reader *r, const lt_frame *frames, size_t n, uint8_t *dst, size_t dst_len);

/* ---- workload generator (native/src/workload_gen.c; docs/workloads.md) ----
 * Python parses and validates a TOML spec and builds one header template per flow; C generates
 * the frames batch by batch into a reader-owned buffer (data valid until the next lt_reader_next). */
#define LT_WL_UDP 1
#define LT_WL_TCP 2
#define LT_WL_ROCEV2 3              /* UDP dst 4791 + InfiniBand BTH (+ RETH/AETH), ICRC appended */
#define LT_WL_MAX_FRAME 16384       /* captured bytes per frame (FCS excluded) */
#define LT_WL_MAX_FLOWS 65536
#define LT_WL_MAX_SIZES 1024        /* size-distribution entries per flow */

typedef struct {
    uint32_t frame_len;      /* captured bytes (FCS excluded); zero Ethernet padding after the L4 end */
    uint32_t payload_len;    /* seed-derived bytes right after the header template */
    uint32_t pad;            /* RoCEv2: zero pad bytes after the payload (BTH PadCnt, 0..3); else 0 */
    uint32_t weight;         /* relative weight, > 0 */
} lt_workload_size;

typedef struct {
    const uint8_t *header;   /* Ethernet .. L4 header (RoCEv2: .. BTH + RETH/AETH); copied */
    uint32_t header_len;
    uint32_t kind;           /* LT_WL_* */
    uint32_t l3_offset;      /* IPv4 or IPv6 header (version from its first nibble) */
    uint32_t l4_offset;      /* UDP or TCP header; RoCEv2 BTH at l4_offset + 8 */
    uint32_t dmalen_offset;  /* RoCEv2: RETH DMA length set to payload_len here; 0: none */
    uint64_t frames;         /* frames of this flow */
    const lt_workload_size *sizes;
    uint32_t nsizes;
} lt_workload_flow;

typedef struct {
    uint64_t seed;           /* 64-bit seed: payloads and size draws derive from it */
    int64_t start_ns;        /* timestamp of frame 0, ns since the epoch */
    uint64_t interframe_ps;  /* gap between consecutive frames (all flows), picoseconds */
    const lt_workload_flow *flows;
    uint32_t nflows;
} lt_workload_spec;

/* A reader whose frames come from the generator (format LT_FMT_WORKLOAD, LINKTYPE_ETHERNET).
 * Returns LT_OK, LT_ERR_ARG (message names the flow and field) or LT_ERR_NOMEM. */
int lt_reader_open_workload(const lt_workload_spec *spec, lt_reader **out, char *err, size_t errlen);

/* Write every remaining frame of any reader to `path` as a nanosecond pcap (snaplen 262144,
 * link type of the first frame). Returns LT_OK, LT_ERR_IO, or the reader's error status. */
int lt_reader_write_pcap(lt_reader *r, const char *path, uint64_t *frames_written, char *err, size_t errlen);

/* ---- frame sources in their own modules (AF_XDP, DPDK: native/src/source_bypass.h) ----
 * Wrap `src` and its lt_source_ops (`ops`, of another native module built from this header) in
 * an lt_reader; lt_reader_close then calls ops->close(src). `layout` is the module's
 * LT_SOURCE_LAYOUT and must equal this module's (the struct sizes both were compiled with).
 * LT_OK, LT_ERR_ARG (NULL or a layout mismatch; src is not closed) or LT_ERR_NOMEM (src is not
 * closed). */
int lt_reader_open_source(const void *ops, void *src, int format, uint32_t layout, lt_reader **out);

/* ======== 2. strip: which bytes of a frame are hashed (native/src/strip.c, docs/strip-modes.md) ======== */

/* ---- strip modes ---- */
#define LT_STRIP_FRAME 0    /* the captured bytes as stored */
#define LT_STRIP_L3 1       /* minus the link-layer header and Ethernet padding */
#define LT_STRIP_PAYLOAD 2  /* minus IP (with options / extension headers) and UDP/TCP headers */
#define LT_STRIP_RDMA 3     /* payload, and for RoCEv2 (UDP 4791) minus BTH, ETHs and ICRC */

/* The byte range [*offset, *offset + *length) of `frame` that strip mode `strip` hashes, and the
 * record flags it adds in *flags (MALFORMED, NON_IP, FRAGMENT, UNSUPPORTED_LINKTYPE; TRUNCATED
 * is set by the engine). Never reads past caplen; offset + length <= caplen always.
 * Returns LT_OK, or LT_ERR_ARG for an unknown strip mode. */
int lt_strip(int strip, uint32_t linktype, const uint8_t *frame, uint32_t caplen, uint32_t wire_len,
             uint32_t *offset, uint32_t *length, uint16_t *flags);

/* ======== 3. digest: keyed digests on CPU paths (native/src/dispatch.c, digest*.c, cpu.c) ======== */

/* ---- digest algorithms ---- */
#define LT_ALG_SIPHASH_1_3_128 1
#define LT_ALG_SIPHASH_2_4_128 2
#define LT_ALG_SIPHASH_1_3_64 3      /* bench only */
#define LT_ALG_SIPHASH_2_4_64 4      /* bench only */
#define LT_ALG_AES_128_GMAC 5        /* AES-128-GCM tag, empty plaintext, frame as AAD, zero 96-bit IV */
#define LT_ALG_BLAKE3_KEYED_128 6    /* BLAKE3 keyed_hash, output truncated to 16 bytes */
#define LT_ALG_BLAKE3_KEYED_256 7    /* BLAKE3 keyed_hash, 32 bytes */
#define LT_ALG_HMAC_SHA256_128 8     /* HMAC-SHA-256 (32-byte key), truncated to 16 bytes */

/* Output size in bytes of an algorithm, key size in bytes; 0 when unknown. */
size_t lt_digest_size(int algorithm);
size_t lt_key_size(int algorithm);

/* Digest one message with the CPU path currently selected (the conformance kit, known-answer tests). */
int lt_digest(int algorithm, const uint8_t *key, const uint8_t *msg, size_t len, uint8_t *out);

/* Digest n messages (msgs[i], lens[i] bytes) into out + i * out_stride with the CPU path currently
 * selected: the path's multi-buffer code where it has one (e.g. "avx512-mb"), else one message at a
 * time. Results equal lt_digest on each message. */
int lt_digest_many(int algorithm, const uint8_t *key, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                   uint8_t *out, size_t out_stride);

/* ---- CPU paths (dispatch) ----
 * Each algorithm runs on one CPU path, chosen once from CPUID (best first), or forced with the
 * environment variable LEDGERTOOL_CPU_PATH (docs/algorithms.md). Names: "portable" (plain C,
 * every machine), "aesni-pclmul", "sha-ni", "sse41", "avx512vl", and the multi-buffer paths
 * "avx2-mb", "avx512-mb", and on arm64 "neon-mb" (several frames at once in SIMD lanes; single
 * messages run scalar code), and for aes-128-gmac "vpclmul-avx512-mb" (GHASH of four frames per
 * reduction with VPCLMULQDQ). */

/* Name of the path in use for `algorithm` ("" for an unknown id). */
const char *lt_cpu_path(int algorithm);
/* Comma-separated names of the paths this CPU can run for `algorithm`, best first. */
int lt_cpu_paths(int algorithm, char *buf, size_t len);
/* Use `path` for `algorithm` from now on (engines already made keep theirs); NULL or "" returns to
 * the CPUID choice. LT_ERR_ARG for an unknown path or one this CPU cannot run. */
int lt_cpu_path_force(int algorithm, const char *path);
/* Why LEDGERTOOL_CPU_PATH was not (fully) honoured, or "". */
const char *lt_cpu_path_note(void);

/* ======== 4. engine: reader -> strip -> digest -> fixed-size records (native/src/engine.c) ======== */
typedef struct lt_engine lt_engine;

typedef struct {
    int algorithm;           /* LT_ALG_* (64-bit variants are refused) */
    int strip;               /* LT_STRIP_* */
    const uint8_t *key;      /* subkey of lt_key_size(algorithm) bytes; copied */
    size_t key_len;
    uint32_t batch;          /* frames per reader call and per digest pass; 0 = LT_ENGINE_BATCH_DEFAULT */
    uint32_t workers;        /* threads that digest each pass (1..LT_ENGINE_MAX_WORKERS); 0 = 1 */
} lt_engine_config;

#define LT_ENGINE_BATCH_DEFAULT 16384
#define LT_ENGINE_BATCH_MAX 1048576
#define LT_ENGINE_MAX_WORKERS 256

/* With workers > 1 the engine starts workers - 1 pthreads; each pass (up to `batch` frames) is split
 * into contiguous slices, one per thread. Records and digests do not depend on batch or workers. */
int lt_engine_new(lt_reader *r, const lt_engine_config *cfg, lt_engine **out, char *err, size_t errlen);

/* Fill `out` with up to `max_records` records (each lt_record_size(algorithm) bytes), numbered
 * from first_seq. Returns LT_OK with *n > 0, LT_EOF with *n == 0, the reader's error, LT_ERR_IO with
 * *n == 0 when the file shrank while its frames were hashed (sticky, like a reader error), or
 * LT_ERR_ARG when max_records records do not fit in a size_t. */
int lt_engine_fill(lt_engine *e, uint64_t first_seq, uint8_t *out, size_t max_records, size_t *n,
                   uint64_t *bytes_captured);
/* lt_engine_fill for the frames `keep` marks, numbered from first_seq: the next keep_len frames
 * are read (fewer at the end of the capture, or once max_records of them were kept: *frames says
 * how many), and only those whose keep[j] is not 0 are stripped and digested, their records
 * (seq first_seq + j) written to out, *n of them; bytes_captured counts every frame read. What
 * recompute's second reading of a differing capture digests (docs/adr/0011). Returns LT_OK with
 * *frames > 0 (*n may be 0), LT_EOF with *frames == 0, and errors as lt_engine_fill (LT_ERR_ARG
 * also for a NULL keep, n or frames). */
int lt_engine_fill_select(lt_engine *e, uint64_t first_seq, const uint8_t *keep, size_t keep_len, uint8_t *out,
                          size_t max_records, size_t *n, size_t *frames, uint64_t *bytes_captured);

/* Frames whose strip mode could not do what it names and hashed more (docs/strip-modes.md,
 * "Fallbacks"), counted over every record filled so far; 0 for strip `frame`. The reasons are
 * exclusive, each one a record flag: */
typedef struct {
    uint64_t strip_unsupported_linktype; /* UNSUPPORTED_LINKTYPE: a link type strip.c cannot parse; the whole frame */
    uint64_t strip_non_ip;               /* NON_IP: not IPv4/IPv6; from the end of the link header */
    uint64_t strip_malformed;            /* MALFORMED: a header that cannot be followed; from its start */
} lt_engine_stats;

/* LT_OK, or LT_ERR_ARG for NULL arguments. Safe between lt_engine_fill calls. */
int lt_engine_get_stats(const lt_engine *e, lt_engine_stats *out);

void lt_engine_free(lt_engine *e);

/* ======== 5. records: 32-byte fixed part + digest (16 or 32 bytes; docs/ledger-format.md) ======== */
#define LT_RECORD_FIXED 32

/* ---- record flags (on-disk, u16) ---- */
#define LT_FLAG_TRUNCATED 0x0001    /* caplen < wire length */
#define LT_FLAG_MALFORMED 0x0002
#define LT_FLAG_NON_IP 0x0004
#define LT_FLAG_FRAGMENT 0x0008
#define LT_FLAG_UNSUPPORTED_LINKTYPE 0x0010
#define LT_FLAG_NO_TIMESTAMP 0x0020
#define LT_FLAG_CAPLEN_GT_SNAPLEN 0x0040
#define LT_FLAG_GAP 0x8000          /* not a frame: declares `aux` frames dropped by the engine */

/* On-disk size of one record of `algorithm` (LT_RECORD_FIXED + its digest size); 0 when unknown. */
size_t lt_record_size(int algorithm);

/* ======== 5b. windows: one record per link and time window committing to its frames'
 * digests (native/src/window.c; docs/ledger-format.md "Window records"; docs/adr/0012) ========
 * A window record is LT_WINDOW_HEADER bytes (magic "LTWN", version, k, digest size, cells,
 * window_ns, index, frames, wire bytes, declared drops, late frames, the masked keyed multiset
 * hash) followed by `cells` cells of 12 + digest_size bytes (count u32, check u64, XOR of the
 * digests), bytes 64.. XORed with the window's pad. Keys: key_f (the element PRF) and key_pad
 * (the pads), 16 bytes each, derived per ledger, link and window length. */
#define LT_WINDOW_VERSION 1
#define LT_WINDOW_K 3
#define LT_WINDOW_HEADER 80
#define LT_WINDOW_MAX_CELLS 3145728     /* 3 * 2^20 */

typedef struct lt_window_acc lt_window_acc;

/* Bytes of a window record of `cells` cells (a multiple of LT_WINDOW_K, at most
 * LT_WINDOW_MAX_CELLS) and 16- or 32-byte digests; 0 when either is not allowed. */
size_t lt_window_record_size(uint32_t cells, size_t digest_size);
/* The element map's AES paths: every path gives the same records (tests compare them). */
#define LT_WINDOW_PATH_BEST 0      /* the fastest this CPU runs */
#define LT_WINDOW_PATH_PORTABLE 1  /* the table-free constant-time AES of the portable build */
#define LT_WINDOW_PATH_AESNI 2     /* AES-NI, eight blocks in flight */
#define LT_WINDOW_PATH_VAES 3      /* AVX-512 VAES, sixteen blocks in flight (four a zmm) */
/* 1 when this CPU (and build) runs `path`, else 0 */
int lt_window_path_supported(int path);
/* An accumulator for windows of window_ns (1..INT64_MAX) nanoseconds on CPU path `path` (an
 * LT_WINDOW_PATH_*). LT_OK, LT_ERR_ARG (also for a path this CPU cannot run), LT_ERR_NOMEM. */
int lt_window_new(const uint8_t key_f[16], const uint8_t key_pad[16], uint64_t window_ns,
                  uint32_t cells, size_t digest_size, int path, lt_window_acc **out);
/* The name of the accumulator's path: "portable", "aesni" or "vaes-avx512". */
const char *lt_window_path_name(const lt_window_acc *a);
/* Add n records (the engine's: LT_RECORD_FIXED bytes then the digest, `stride` bytes apart; GAP
 * records add their aux to the drops). Every window that a record's later index closes is
 * written to out (out_len bytes: whole records), *n_out of them; when out is full the call stops
 * before the record that would close one more: *consumed records were added (call again with
 * the rest). LT_OK or LT_ERR_ARG. */
int lt_window_add(lt_window_acc *a, const uint8_t *records, size_t n, size_t stride, uint8_t *out,
                  size_t out_len, size_t *n_out, size_t *consumed);
/* lt_engine_fill, and each digest pass's records (up to the engine's batch, 16,384 frames by
 * default) added to `acc` as lt_window_add would right after the pass, while they are in cache:
 * the same records and windows as lt_engine_fill then lt_window_add, in one call. The first
 * *windowed of the *n records were added and *n_windows windows they closed written to win_out;
 * when win_out is full the rest are the caller's to add (lt_window_add). When the file shrank
 * under a pass after earlier ones, those earlier passes are handed out (LT_OK) and LT_ERR_IO
 * comes with the next call. LT_ERR_ARG for an accumulator of another digest size.
 * `scratch` non-zero: the records are wanted only by `acc` (a capture of the window tier alone).
 * With one digest thread the passes after the call's first may then be digested over one another
 * in one area of `out` that stays in cache: afterwards only the first pass's records and those not
 * windowed are in their places in `out`; *n counts every record as before. */
int lt_engine_fill_window(lt_engine *e, uint64_t first_seq, uint8_t *out, size_t max_records,
                          size_t *n, uint64_t *bytes_captured, lt_window_acc *acc, uint8_t *win_out,
                          size_t win_out_len, size_t *n_windows, size_t *windowed, int scratch);
/* Emit the open window, if any (*n_out 0 or 1); a later record goes to a later window. LT_OK, or
 * LT_ERR_ARG when a window is open and out_len is below one record. */
int lt_window_finish(lt_window_acc *a, uint8_t *out, size_t out_len, size_t *n_out);
void lt_window_free(lt_window_acc *a);
/* XOR the record's pad (bytes 64..len) in place: masks an unmasked record and unmasks a masked
 * one. LT_ERR_ARG when the header does not describe a window record of len bytes. */
int lt_window_unmask(const uint8_t key_pad[16], uint8_t *record, size_t len);
/* Subtract two unmasked records of the same shape (the ledger's and the capture's) and peel the
 * difference: the digests only the ledger's window holds into ledger_only (at most max_ledger,
 * *n_ledger), those only the capture's holds into capture_only. *complete = 1 when the table
 * emptied and the decoded digests explain both the frame counts and the hashes exactly; 0 when
 * the difference is beyond what the table (or the caller's room) decodes: the lists are then not
 * an answer. LT_OK, LT_ERR_ARG (headers of another shape or length), LT_ERR_NOMEM. */
int lt_window_decode(const uint8_t key_f[16], const uint8_t *ledger, const uint8_t *capture,
                     size_t len, uint8_t *ledger_only, size_t max_ledger, size_t *n_ledger,
                     uint8_t *capture_only, size_t max_capture, size_t *n_capture,
                     int *complete);

/* ======== 6. merkle: RFC 9162 s2.1.1 leaves and tree hash (native/src/merkle.c) ======== */

/* Merkle leaves (docs/ledger-format.md):
 * out[32*i ..] = SHA-256(0x00 || records[i*leaf_records*record_size ..]) for each block of leaf_records
 * records (the last may be shorter); ceil(count / leaf_records) leaves into `out` (out_len bytes).
 * Uses SHA-NI when the CPU has it and the hmac-sha256-128 path is not forced to portable.
 * LT_ERR_ARG, with nothing written, when record_size is not 48 or 64 (LT_RECORD_FIXED + a 16- or
 * 32-byte digest) or, with leaf_records 1, a window record's size (LT_WINDOW_HEADER + cells *
 * (12 + digest size)), leaf_records is not a power of two in 1..LT_MERKLE_MAX_LEAF_RECORDS,
 * count * record_size overflows, or out_len is below 32 * ceil(count / leaf_records).
 * leaf_records | LT_LEAF_BLAKE3 (here and wherever a leaf_records is taken: lt_rec_*,
 * lt_segment_writer_new) gives the ledger's other leaf construction, BLAKE3 entries (ADR 0013):
 * leaf = SHA-256(0x00 || BLAKE3-256(block)), the entries through the blake3-keyed-256 path's lanes
 * (unkeyed) and the leaf over each entry as above. */
#define LT_MERKLE_MAX_LEAF_RECORDS 65536
#define LT_LEAF_BLAKE3 0x40000000
int lt_merkle_leaves(const uint8_t *records, size_t record_size, size_t count, size_t leaf_records, uint8_t *out,
                     size_t out_len);
/* How many whole SHA-256 leaves lt_merkle_leaves hashes side by side: 16 (AVX-512 lanes: Intel
 * cores that have them, and on the portable path CPUs with AVX-512 and no SHA-NI), 4 (interleaved
 * SHA-NI streams) or 1; every count gives the same leaves. Follows the hmac-sha256-128 path: the
 * portable path on a CPU with SHA-NI hashes one at a time. LEDGERTOOL_MERKLE_LANES=1, 4 or 16 sets
 * the count at first use (one this CPU cannot run is not taken). */
int lt_merkle_lanes(void);
/* out = the RFC 9162 s2.1.1 Merkle tree hash over n >= 1 leaf hashes (32 bytes each, concatenated);
 * LT_ERR_ARG for n = 0 (the empty tree's hash is SHA-256 of nothing), LT_ERR_NOMEM. */
int lt_merkle_root(const uint8_t *leaf_hashes, size_t n, uint8_t out[32]);

/* ---- raw record files: ledger format v2's sealed segments (native/src/recfile.c) ----
 * A `.rec` file is a 256-byte header, then blocks: u32 count (1..LT_REC_MAX_BLOCK_RECORDS) ||
 * count * record_size record bytes || 32-byte MAC, nothing after the last block
 * (docs/ledger-format.md, "Sealed segment: raw record file"). The header is not looked at here. */
#define LT_REC_HEADER_SIZE 256
#define LT_REC_MAX_BLOCK_RECORDS 65536
#define LT_REC_MAC_SIZE 32
/* lt_rec_info.error: why the framing does not parse */
#define LT_REC_HEADER_CUT 1   /* the file is shorter than its header */
#define LT_REC_BAD_COUNT 2    /* a block's count is 0 or above LT_REC_MAX_BLOCK_RECORDS */
#define LT_REC_BLOCK_CUT 3    /* a block runs past the end of the file */
#define LT_REC_TRAILING 4     /* 1-3 bytes after the last whole block */
#define LT_REC_SHRUNK 5       /* lt_rec_file: the file ends before `len` (at error_offset) */
#define LT_REC_READ 6         /* lt_rec_file: a read failed (errno, e.g. EIO; error_offset: byte) */
typedef struct {
    uint64_t records;       /* records copied to `out` (of the whole blocks before any error) */
    uint64_t blocks;        /* whole blocks walked */
    uint64_t error_offset;  /* LT_ERR_CORRUPT: byte offset of the block (its count field) that does not frame */
    uint32_t error_count;   /* that block's count field (0 when it has none) */
    int error;              /* LT_REC_*; 0 on LT_OK */
    /* what verify checks per record, counted during the copy (docs/ledger-format.md, "Records") */
    uint64_t gaps;          /* records with LT_FLAG_GAP */
    uint64_t drops;         /* sum of `aux` over them */
    int64_t first_ts_ns, last_ts_ns;  /* of the first and last record (0 when there is none) */
    int seq_contiguous;     /* 1 when record k has seq first_seq + k for every k */
} lt_rec_info;
/* Walk the blocks of the raw record file file[0..len) of record_size-byte records and copy their
 * records, framing stripped, to out (out_len bytes; len - 256 always suffices), counting GAP records,
 * their drops, the first and last ts_ns and whether seq runs first_seq, first_seq + 1, ...; then,
 * when leaves is not NULL, lt_merkle_leaves over them into leaves (leaves_len bytes). LT_OK; LT_ERR_CORRUPT with
 * info->error / error_offset / error_count when the framing breaks (records before it are in out);
 * LT_ERR_ARG for a record size other than 48 / 64, NULL pointers, out too small, or
 * lt_merkle_leaves's argument errors. */
int lt_rec_records(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, uint8_t *out,
                   size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info);
/* lt_rec_records without the copy for the caller: the same walk, checks and info, and the same leaves
 * (into leaves, leaves_len bytes), computed from a stage of ~4096 records (whole leaves) the
 * records are copied into piece by piece, so the checks and the leaves read the same bytes even
 * when `file` is a map its owner rewrites; for a reader that wants the leaves and the counts but
 * not the records.
 * LT_OK, LT_ERR_CORRUPT as lt_rec_records, LT_ERR_NOMEM, LT_ERR_ARG (also when leaves is too short). */
int lt_rec_leaves(const uint8_t *file, size_t len, size_t record_size, uint64_t first_seq, size_t leaf_records,
                  uint8_t *leaves, size_t leaves_len, lt_rec_info *info);
/* lt_rec_records (out not NULL) or lt_rec_leaves (out NULL) over the raw record file open on `fd`, of
 * `len` bytes (the caller's fstat; >= LT_REC_HEADER_SIZE), read with pread(2) (never mapped, the
 * offset of `fd` untouched) into `header` (its first LT_REC_HEADER_SIZE bytes), `out` or a stage
 * of this call, each byte once. The storage holder may truncate the file meanwhile: LT_ERR_IO with
 * info->error LT_REC_SHRUNK and info->error_offset the byte that is gone; a read the storage fails
 * (EIO) is LT_ERR_IO with info->error LT_REC_READ, error_offset the byte not read and errno set.
 * Otherwise the results of lt_rec_records / lt_rec_leaves (LT_ERR_NOMEM also for its buffers). */
int lt_rec_file(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, lt_rec_info *info);
/* lt_rec_file with `out` and `leaves` (both required) for recompute's fast verdict: each run of
 * records, once copied and its leaves hashed, is also added from that copy (still in cache) to the
 * multiset hash acc/count under `key`, in 2^part_bits parts, and counted per second into secs/counts
 * (cap entries, *nruns runs in all: lt_mset_add_parts and lt_second_runs, GAP records left out);
 * `ids` (NULL: none; else one entry a record the file holds, part_bits 1..16) gets each record's
 * part at 16 bits (lt_mset_add_parts_ids). The records, leaves and info are lt_rec_file's; LT_ERR_ARG
 * also for a missing out, leaves, key or output. */
int lt_rec_file_mset(int fd, size_t len, size_t record_size, uint64_t first_seq, uint8_t *header, uint8_t *out,
                     size_t out_len, size_t leaf_records, uint8_t *leaves, size_t leaves_len, const uint8_t key[16],
                     const uint64_t part_key[2], unsigned part_bits, uint64_t *acc, uint64_t *count, int64_t *secs, uint64_t *counts, size_t cap, size_t *nruns,
                     uint16_t *ids, lt_rec_info *info);
/* n records of record_size bytes (1..4096) read from the file open on `fd` at the byte offsets
 * `offsets` into out (n * record_size bytes), one pread(2) each (short reads retried): single
 * records of raw record files read again (recompute's second reading, reconcile/marks.py). LT_OK;
 * LT_ERR_IO with *done the records read before the one that failed (errno set) or that the file
 * ends inside (errno 0); LT_ERR_ARG for NULL pointers or a record size out of bounds. */
int lt_pread_records(int fd, const uint64_t *offsets, size_t n, size_t record_size, uint8_t *out, size_t *done);
/* The records of a compacted segment (its Parquet columns, decoded by the caller: `n` values each,
 * the digests `digest_size` bytes apart) interleaved into `out` (n * (32 + digest_size) bytes) in
 * the record layout, with the counts verify checks (info: gaps, drops, first/last ts_ns,
 * seq_contiguous from first_seq; records = n) made in the same pass: one pass over the columns
 * instead of one per field. LT_OK, or LT_ERR_ARG (out too short, a NULL column with n > 0). */
int lt_rec_from_columns(size_t n, size_t digest_size, uint64_t first_seq, const uint64_t *seq,
                        const int64_t *ts_ns, const uint32_t *wire_len, const uint32_t *cap_len,
                        const uint16_t *flags, const uint16_t *linktype, const uint32_t *aux,
                        const uint8_t *digest, uint8_t *out, size_t out_len, lt_rec_info *info);

/* ======== 6b. segment: the open-segment writer (native/src/segment_writer.c; docs/ledger-format.md
 * "Open segment file", ADR 0009) ========
 * Python creates the file and writes its 256-byte header; this writer appends the blocks
 * (u32 count || records || 32-byte MAC) with write(2) to `fd`, computing from the caller's memory
 * the segment's Merkle leaves (SHA-256(0x00 || leaf_records records), lt_merkle_leaves), each
 * block's MAC = HMAC-SHA256(key, "ledgertool open-segment leaves v2" || 0x00 || previous MAC ||
 * u64 block index || u32 count || the block's leaf-chunk hashes) chained from `chain` (the header's
 * MAC, C[-1]), and the seal's counters. Blocks start at the segment's leaf boundaries: an append
 * completes the open leaf (one block), writes whole leaves (blocks of at most
 * LT_SEGMENT_MAX_BLOCK_RECORDS), then the rest (one short block), so every record appended is in
 * the file when append returns; the open leaf's records (< leaf_records) are also kept in the writer. */
#define LT_SEGMENT_MAX_RECORDS 67108864      /* 2^26: the most records of one segment */
#define LT_SEGMENT_MAX_BLOCK_RECORDS 65536

typedef struct {
    uint64_t records;
    uint64_t frames;         /* records without LT_FLAG_GAP */
    uint64_t drops;          /* sum of aux over the GAP records */
    uint64_t first_seq;      /* of the first record appended (valid once records > 0) */
    uint64_t last_seq;
    int64_t first_ts_ns;
    int64_t last_ts_ns;
    uint64_t blocks;         /* blocks written */
    uint64_t file_bytes;     /* bytes written after the header */
    uint64_t leaves;         /* Merkle leaves (lt_segment_writer_finish fills it) */
} lt_segment_counters;

typedef struct lt_segment_writer lt_segment_writer;

/* A writer appending to `fd` (not closed by the writer) with MAC key `key` (key_len bytes, copied
 * into the HMAC pads), chain value `chain`, records of record_size (48 or 64; with leaf_records 1
 * also a window record's size, whose counters then mean nothing) bytes, leaves of
 * leaf_records (a power of two in 1..LT_MERKLE_MAX_LEAF_RECORDS), at most max_records
 * (1..LT_SEGMENT_MAX_RECORDS) records in all. LT_OK, LT_ERR_ARG, LT_ERR_NOMEM. */
int lt_segment_writer_new(int fd, const uint8_t *key, size_t key_len, const uint8_t chain[32], size_t record_size,
                          size_t leaf_records, uint64_t max_records, lt_segment_writer **out);
/* Append `count` records (count * record_size bytes at `records`; 0 is allowed). LT_OK;
 * LT_ERR_ARG when they would exceed max_records (nothing written); LT_ERR_IO with *os_errno set
 * when write(2) failed; LT_ERR_NOMEM. After any error the writer is failed for good (the file may
 * end in a torn block): later appends return LT_ERR_IO, finish LT_ERR_ARG. */
int lt_segment_writer_append(lt_segment_writer *w, const uint8_t *records, size_t count, int *os_errno);
/* Close the last (shorter) leaf, and give the RFC 9162 root over all leaves, the last leaf and the
 * counters. LT_ERR_ARG when no record was appended or the writer failed; no append after it. */
int lt_segment_writer_finish(lt_segment_writer *w, uint8_t root[32], uint8_t last_leaf[32],
                             lt_segment_counters *counters);
/* Copy the whole leaves so far (after finish: all of them, counters.leaves) into out (out_len
 * bytes, at least 32 per leaf). LT_ERR_ARG when out is too small. */
int lt_segment_writer_leaves(const lt_segment_writer *w, uint8_t *out, size_t out_len);
/* Before the first append: write the file through 4 KiB-aligned staging from now on, as O_DIRECT
 * needs (the caller sets O_DIRECT on fd, or not: the bytes are the same). `head` (head_len <=
 * 4 MiB bytes, the segment header) is the file's first bytes, written now. Every write is then
 * of whole 4 KiB pages at 4 KiB-aligned offsets: after each append the file ends in zero padding
 * to a 4 KiB boundary (docs/ledger-format.md), cut by lt_segment_writer_trim. A write that fails
 * with EINVAL while O_DIRECT is set clears O_DIRECT and is retried. LT_OK, LT_ERR_ARG (after an
 * append, or twice), LT_ERR_NOMEM, LT_ERR_IO with *os_errno. */
int lt_segment_writer_direct(lt_segment_writer *w, const uint8_t *head, size_t head_len,
                             int *os_errno);
/* Direct I/O: truncate the file to the bytes written (the padding cut), before the caller's
 * fsync at close; nothing without direct I/O or after a failed write. LT_OK or LT_ERR_IO. */
int lt_segment_writer_trim(lt_segment_writer *w, int *os_errno);
void lt_segment_writer_free(lt_segment_writer *w);

/* ======== 7. live: capture from an interface and replay onto one ======== */

/* ---- live capture: AF_PACKET TPACKET_V3 (native/src/capture_afpacket.c, docs/capture.md) ---- */

typedef struct {
    const char *ifname;     /* interface name */
    uint32_t ring_kb;       /* receive ring size in KiB (0: 65536 = 64 MiB) */
    uint32_t block_kb;      /* ring block size in KiB, power of two (0: min(1024, ring/8), >= 64) */
    uint32_t block_ms;      /* block retire timeout in ms (0: 10) */
    uint32_t poll_ms;       /* longest wait in lt_reader_next before it returns 0 frames (0: 100) */
    int fanout;             /* 0: no PACKET_FANOUT (one worker); 1: join a fanout hash group (several) */
    uint32_t fanout_group;  /* with fanout: the group id to join, 1..65535; 0: a new group with a random id */
    int promisc;            /* 1: put the interface in promiscuous mode while the socket is open */
    int pin_cpu;            /* >= 0: pin the calling thread to this CPU; -1: no pinning */
} lt_live_config;

/* Kernel and ring counters of a live reader (cumulative since open). */
typedef struct {
    uint64_t kernel_packets;  /* PACKET_STATISTICS tp_packets (frames the socket saw, drops included) */
    uint64_t kernel_drops;    /* PACKET_STATISTICS tp_drops (frames the ring had no room for) */
    uint64_t freeze_count;    /* PACKET_STATISTICS tp_freeze_q_cnt (times the ring was full) */
    uint64_t frames;          /* frames handed out (GAP pseudo-frames not counted) */
    uint64_t gaps;            /* GAP pseudo-frames handed out */
    uint64_t drops_declared;  /* sum of their counts (== kernel_drops once stopped) */
    uint64_t blocks;          /* ring blocks consumed */
    uint64_t vlan_restored;   /* frames whose 802.1Q/802.1ad tag the kernel had stripped and we put back */
    uint32_t ring_bytes;      /* ring size actually configured */
    uint32_t block_bytes;
    uint32_t block_count;
} lt_live_stats;

/* Open a TPACKET_V3 receive ring on cfg->ifname; with cfg->fanout, joined to a PACKET_FANOUT hash
 * group (a random id from getrandom unless cfg->fanout_group names one: see lt_live_get_fanout).
 * The reader's lt_reader_next():
 *   - hands out frames pointing into the ring (zero copy); a block goes back to the kernel on the
 *     following lt_reader_next() call, so frames stay valid until then;
 *   - returns LT_OK with *n == 0 when nothing arrived within poll_ms, and also once every poll_ms
 *     under steady traffic (not the end: the caller checks its stop conditions and calls again);
 *   - reads PACKET_STATISTICS after every block and at least every poll_ms, and hands out one
 *     LT_RF_GAP pseudo-frame (wire_len = frames dropped since the last read) where drops appear;
 *   - after lt_live_request_stop() hands out what the ring holds (drain = 1, waiting at most
 *     block_ms + poll_ms for the open block to retire) or nothing more (drain = 0), then the
 *     final drops as a GAP, then LT_EOF.
 * Returns LT_OK, LT_ERR_IO (socket/ring/bind failed, message names the call and errno) or
 * LT_ERR_ARG. Needs CAP_NET_RAW. */
int lt_reader_open_live(const lt_live_config *cfg, lt_reader **out, char *err, size_t errlen);

/* Ask a live reader to stop (see above). LT_ERR_ARG when r is not a live reader. */
int lt_live_request_stop(lt_reader *r, int drain);
int lt_live_get_stats(const lt_reader *r, lt_live_stats *out);
/* *group = the PACKET_FANOUT group id r joined (0: none). LT_ERR_ARG when r is not a live reader. */
int lt_live_get_fanout(const lt_reader *r, uint32_t *group);
/* Read the kernel counters into r's stats now (kernel_packets is cumulative since open either way);
 * only while no other thread is inside lt_reader_next(r). LT_OK, LT_ERR_IO, LT_ERR_ARG. */
int lt_live_sync_stats(lt_reader *r);

/* ---- replay: transmit a capture file on an interface (native/src/replay.c) ---- */

#define LT_REPLAY_TIMING 0      /* the capture's own inter-frame times */
#define LT_REPLAY_PPS 1         /* rate = frames per second */
#define LT_REPLAY_MBPS 2        /* rate = megabits per second of frame bytes */
#define LT_REPLAY_TOPSPEED 3    /* as fast as the socket takes them */

typedef struct {
    const char *path;       /* pcap/pcapng file */
    const char *ifname;
    int mode;               /* LT_REPLAY_* */
    double rate;            /* for LT_REPLAY_PPS / LT_REPLAY_MBPS */
    uint32_t loops;         /* times to send the file (0: 1) */
    uint32_t batch;         /* frames per sendmmsg call (0: automatic) */
} lt_replay_config;

typedef struct {
    uint64_t frames_sent;
    uint64_t bytes_sent;        /* frame bytes (captured bytes as stored) */
    uint64_t skipped_too_large; /* caplen > MTU + link header (+ 4 for a VLAN tag): the kernel refuses them */
    uint64_t skipped_too_short; /* caplen < 14 (no Ethernet header) */
    uint64_t skipped_linktype;  /* not Ethernet (LINKTYPE 1) */
    uint64_t send_errors;       /* frames the socket refused for another reason */
    uint64_t retries;           /* ENOBUFS/EAGAIN waits */
    uint64_t frames_in_file;
    uint64_t elapsed_ns;
    int stopped;                /* 1: lt_replay_stop() ended the run early */
} lt_replay_stats;

typedef struct lt_replay lt_replay;

/* Read the capture (format errors as from lt_reader_open) and open a PF_PACKET socket on ifname. */
int lt_replay_open(const lt_replay_config *cfg, lt_replay **out, char *err, size_t errlen);
/* Send; blocks until done or lt_replay_stop(). Returns LT_OK or LT_ERR_IO (message in err). */
int lt_replay_run(lt_replay *p, char *err, size_t errlen);
/* Thread-safe: progress so far, and an asynchronous stop request. */
void lt_replay_get_stats(const lt_replay *p, lt_replay_stats *out);
void lt_replay_stop(lt_replay *p);
void lt_replay_close(lt_replay *p);

/* ======== 8. process hardening (native/src/process.c) ======== */

/* No core dumps from now until the process exits (RLIMIT_CORE soft and hard 0, and on Linux
 * PR_SET_DUMPABLE 0, which also keeps same-user debuggers out). Called before secret key
 * material is loaded. LT_OK, or LT_ERR_IO with the failing call and errno in err. */
int lt_no_core_dumps(char *err, size_t errlen);

/* ======== 9. multiset pairing (native/src/multiset.c) ======== */

/* Which records pair one to one: those whose digest's first 8 bytes occur exactly once among
 * the n_ledger ledger records and exactly once among the n_capture capture records, the two
 * whole digests being equal. lmask[i] / cmask[j] become 1 for those and 0 for every other record
 * (n_ledger and n_capture bytes). Records lie `stride` bytes apart, each with its digest
 * (digest_size bytes) at digest_offset. `seed` keys
 * the hash of the digest's first 8 bytes (a random one keeps crafted digests from crowding one
 * bucket). Allocates 16 bytes per record of both sides and 8 per record of the larger side for
 * the call; no Python object is touched (the binding releases the GIL). Returns LT_OK,
 * LT_ERR_ARG (NULL buffers with records, a digest outside the stride, counts too large) or
 * LT_ERR_NOMEM. */
int lt_once_each(const uint8_t *ledger, size_t n_ledger, size_t ledger_stride,
                 const uint8_t *capture, size_t n_capture, size_t capture_stride,
                 size_t digest_offset, size_t digest_size, uint64_t seed,
                 uint8_t *lmask, uint8_t *cmask);

/* The ordered fast path of the pairing: ledger and capture records that pair k-th occurrence
 * with k-th occurrence of their digest in recompute's exact pairing (ledger occurrences in
 * (ts_ns, link, seq) order, capture ones in (ts_ns, index) order), found by walking both arrays
 * in step while they agree and resynchronising after a drop or an insert. lmask[i] / cmask[j]
 * become 1 for the records paired (*paired of them on each side), 0 for the rest; taking the
 * paired ones out leaves a rest whose exact pairing gives every other record the class the whole
 * one did (the proof: native/src/multiset.c). Records are LT_RECORD_FIXED-byte headers (seq at
 * 0, ts_ns at 8) and a digest at digest_offset, `stride` bytes apart; ledger_link (NULL: one
 * link) gives each ledger record's link as a number in the links' sort order. When either
 * array is not in its pairing order (keys strictly increasing), or the sides mostly differ,
 * fewer or no records are paired. Allocates only a set of the rest's digest prefixes. Returns
 * LT_OK, LT_ERR_ARG (NULL buffers with records, a digest outside the stride or inside the fixed
 * header) or LT_ERR_NOMEM (masks all 0). */
int lt_pair_in_order(const uint8_t *ledger, size_t n_ledger, size_t ledger_stride, const uint32_t *ledger_link,
                     const uint8_t *capture, size_t n_capture, size_t capture_stride,
                     size_t digest_offset, size_t digest_size, uint8_t *lmask, uint8_t *cmask, size_t *paired);

/* A multiset hash of the records' digests (native/src/multiset_hash.c; docs/adr/0011): acc becomes
 * (acc + sum of F(digest)) mod 2^127 - 1 over the n records whose flags (the u16 at byte 24) share
 * no bit with skip_flags, and *count grows by their number. F is AES-128 under `key` (16 bytes,
 * drawn at random by the caller for one comparison) of a 16-byte digest, the fixed-length CBC-MAC
 * of a longer one (digest_size a multiple of 16). acc is two words, low first, a value below
 * 2^127 - 1 on entry and on return; sums of several calls (or threads, added mod 2^127 - 1) are
 * the sum of the whole. Records are `stride` bytes apart, each with its digest at digest_offset.
 * `portable` 1 uses the table-free AES even where AES-NI exists (tests compare the paths).
 * Returns LT_OK or LT_ERR_ARG (NULL pointers, a digest size not a multiple of 16, a digest
 * outside the record or inside its fixed part, an acc that is not below 2^127 - 1). */
int lt_mset_add(const uint8_t key[16], const uint8_t *records, size_t n, size_t stride, size_t digest_offset,
                size_t digest_size, uint16_t skip_flags, int portable, uint64_t acc[2], uint64_t *count);
/* lt_mset_add into 2^part_bits parts (docs/adr/0011, "Parts"): a record whose digest d is in part
 * i = ((le64(d[0:8]) ^ part_key[0]) * (part_key[1] | 1)) >> (64 - part_bits) (a keyed multiply-shift
 * hash, independent of the AES key) is added to acc[2i], acc[2i+1] (mod 2^127 - 1) and counted in
 * count[i]. part_bits 0 is lt_mset_add (one part; part_key may be NULL), at most
 * LT_MSET_MAX_PART_BITS. Each acc pair must be below 2^127 - 1 on entry (not checked here: the
 * caller starts from zeros); LT_OK or LT_ERR_ARG as lt_mset_add. */
#define LT_MSET_MAX_PART_BITS 20
int lt_mset_add_parts(const uint8_t key[16], const uint64_t part_key[2], unsigned part_bits, const uint8_t *records,
                      size_t n, size_t stride, size_t digest_offset, size_t digest_size, uint16_t skip_flags,
                      int portable, uint64_t *acc, uint64_t *count);
/* lt_mset_add_parts (part_bits 1..LT_MSET_MAX_PART_BITS) that also writes each record's part at 16
 * bits, the top 16 bits of the product above, to ids[i] (n entries; NULL: none; part_bits at most
 * 16 then: ids[i] >> (16 - part_bits) is the record's part), skipped records' included, and adds
 * the number of records counted to *added (NULL: not): what recompute keeps of the first reading
 * to find a differing part's rows again without digesting every frame (docs/adr/0011). LT_ERR_ARG
 * as lt_mset_add_parts, and for part_bits 0, or above 16 with ids. */
int lt_mset_add_parts_ids(const uint8_t key[16], const uint64_t part_key[2], unsigned part_bits,
                          const uint8_t *records, size_t n, size_t stride, size_t digest_offset, size_t digest_size,
                          uint16_t skip_flags, int portable, uint64_t *acc, uint64_t *count, uint16_t *ids,
                          uint64_t *added);
/* The indexes i < n (ascending) whose part p = ids[i] >> shift (lt_mset_add_parts_ids's ids: shift
 * 16 - part_bits gives the parts of part_bits) the caller wants: p < n_wanted and wanted[p] != 0.
 * The first `cap` go to out, *found counts them all. LT_OK, or LT_ERR_ARG for NULL pointers (out
 * may be NULL with cap 0) or a shift above 15. */
int lt_mset_parts_where(const uint16_t *ids, size_t n, unsigned shift, const uint8_t *wanted, size_t n_wanted,
                        uint64_t *out, size_t cap, size_t *found);
/* 1 when lt_mset_add runs on AES instructions here (~5-10 ns a record), 0 when only the portable
 * AES is available (microseconds a record: recompute then pairs exactly instead). */
int lt_mset_accelerated(void);

/* The seconds of the records whose flags share no bit with skip_flags, as runs of consecutive
 * records in one second (floor(ts_ns / 10^9), rounding down for times before the epoch) in
 * record order: secs[i], counts[i] for the first min(*nruns, cap) runs, *nruns the number of
 * runs (more than cap: the caller counts another way). A second may begin several runs when the
 * records are not in time order. LT_OK, or LT_ERR_ARG (NULL pointers, stride below
 * LT_RECORD_FIXED). (native/src/tally.c) */
int lt_second_runs(const uint8_t *records, size_t n, size_t stride, uint16_t skip_flags, int64_t *secs,
                   uint64_t *counts, size_t cap, size_t *nruns);

/* CDEF END */

#ifdef __cplusplus
}
#endif
#endif /* LEDGERTOOL_H */
