/*
 * libFuzzer harness: capture-file reader (native/src/reader.c), pcap and pcapng.
 *
 * Input: the bytes of a capture file. Checks, for every input:
 *   - lt_reader_open returns a documented status and a reader only with LT_OK;
 *   - lt_reader_next hands out frames in batches of a size drawn from the input (1..64);
 *     record offsets increase strictly; every frame's data is exactly input[offset + H ..
 *     offset + H + caplen) with H the record/block header (pcap 16 or 24, pcapng EPB/PB 28,
 *     SPB 12), that range lies inside the input, and every frame points into one and the same
 *     map (data - offset - H is constant);
 *   - it ends with LT_EOF or LT_ERR_* and *n == 0, and stays ended (sticky);
 *   - lt_reader_get_info agrees: frames counted, error status/offset inside the file,
 *     message NUL-terminated.
 * Sanitizers (ASan, UBSan) catch any read past the map or undefined arithmetic on the way.
 */
#include "fuzz_common.h"

#define MAX_BATCH 64

/* Bytes from a frame's record/block start to its packet data, from the input itself:
 * pcap 16 (24 modified); pcapng EPB/PB 28, SPB 12; 0 for anything else (not a packet). */
static uint64_t record_header_len(const lt_reader_info *info, const uint8_t *data, size_t size, const lt_frame *f) {
    if (info->format != LT_FMT_PCAPNG) return info->format == LT_FMT_PCAP_MODIFIED ? 24 : 16;
    if (f->offset + 4 > size) return 0;
    const uint8_t *p = data + f->offset;
    const uint32_t be = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    const uint32_t le = (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
    const uint32_t type = (f->rflags & LT_RF_BIG_ENDIAN) ? be : le;
    switch (type) {
    case 2: case 6: return 28;
    case 3: return 12;
    default: return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64], err[512];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0) return 0;

    lt_reader *r = NULL;
    int st = lt_reader_open(path, &r, err, sizeof err);
    FUZZ_CHECK(fuzz_known_status(st) && st != LT_EOF, "open status %d", st);
    FUZZ_CHECK((st == LT_OK) == (r != NULL), "open status %d with reader %p", st, (void *)r);
    FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL, "open message not terminated");
    if (st != LT_OK) {
        FUZZ_CHECK(err[0] != 0, "open failed (%d) without a message", st);
        close(fd);
        return 0;
    }

    /* The reader maps the file itself: bounds are checked against the file's size, and the
     * data pointers against the reader's own map, which we learn from the first frame. */
    lt_reader_info info;
    lt_reader_get_info(r, &info);
    FUZZ_CHECK(info.file_size == size, "file_size %llu != %zu", (unsigned long long)info.file_size, size);

    size_t batch = size ? (size_t)(data[size - 1] % MAX_BATCH) + 1 : 1;
    lt_frame frames[MAX_BATCH];
    const uint8_t *base = NULL; /* the reader's map, derived from the first frame */
    uint64_t total = 0, last_off = 0;
    int have_last = 0;
    for (;;) {
        size_t n = 12345;
        st = lt_reader_next(r, frames, batch, &n);
        FUZZ_CHECK(fuzz_known_status(st), "next status %d", st);
        if (st != LT_OK) {
            FUZZ_CHECK(n == 0, "status %d with %zu frames", st, n);
            break;
        }
        FUZZ_CHECK(n >= 1 && n <= batch, "LT_OK with %zu frames (batch %zu)", n, batch);
        for (size_t i = 0; i < n; i++) {
            const lt_frame *f = &frames[i];
            const unsigned long long off = (unsigned long long)f->offset;
            FUZZ_CHECK(f->offset < size, "frame offset %llu past size %zu", off, size);
            FUZZ_CHECK(!have_last || f->offset > last_off, "frame offset %llu not after %llu", off,
                       (unsigned long long)last_off);
            last_off = f->offset;
            have_last = 1;
            FUZZ_CHECK(f->data != NULL, "frame at %llu has no data", off);
            uint64_t hdr = record_header_len(&info, data, size, f);
            FUZZ_CHECK(hdr != 0, "frame at %llu: record/block type has no packet data", off);
            /* The frame's bytes must lie inside the input: record header + caplen <= file size. */
            FUZZ_CHECK(f->offset + hdr + (uint64_t)f->caplen <= size,
                       "frame at %llu: header %llu + caplen %u runs past the %zu-byte input", off,
                       (unsigned long long)hdr, f->caplen, size);
            /* The reader's map holds the input's bytes: every frame must point at map + offset + hdr
             * for one and the same map, and hold exactly the input's bytes there. */
            const uint8_t *b = f->data - f->offset - hdr;
            if (!base) base = b;
            FUZZ_CHECK(b == base, "frame at %llu: data pointer %p not at map + %llu", off, (const void *)f->data,
                       (unsigned long long)(f->offset + hdr));
            FUZZ_CHECK(memcmp(f->data, data + f->offset + hdr, f->caplen) == 0,
                       "frame at %llu: bytes differ from the input", off);
            total++;
        }
    }
    lt_reader_info end;
    lt_reader_get_info(r, &end);
    FUZZ_CHECK(end.frames == total, "info.frames %llu != %llu handed out", (unsigned long long)end.frames,
               (unsigned long long)total);
    FUZZ_CHECK(memchr(end.message, 0, sizeof end.message) != NULL, "info message not terminated");
    if (st == LT_EOF) {
        FUZZ_CHECK(end.error == 0, "EOF with info.error %d", end.error);
        if (end.truncated) FUZZ_CHECK(end.truncated_offset < size, "truncated_offset past EOF");
    } else {
        FUZZ_CHECK(end.error == st, "status %d but info.error %d", st, end.error);
        FUZZ_CHECK(end.error_offset < size, "error_offset %llu past EOF %zu", (unsigned long long)end.error_offset,
                   size);
    }
    /* Sticky end. */
    size_t n2 = 99;
    int st2 = lt_reader_next(r, frames, batch, &n2);
    FUZZ_CHECK(st2 == st && n2 == 0, "after end: status %d (was %d), %zu frames", st2, st, n2);
    lt_reader_close(r);
    close(fd);
    return 0;
}
