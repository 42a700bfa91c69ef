/*
 * libFuzzer harness: strip modes (native/src/strip.c, lt_strip).
 *
 * Input: first 4 bytes = wire length (LE u32, so both cut and uncut frames are reached), the
 * rest = one captured frame. The frame is copied into a heap buffer of exactly caplen bytes so
 * ASan reports any read past caplen. For every strip mode (0..3) and link types NULL (0),
 * Ethernet (1), RAW (101), LOOP (108), Linux SLL (113), IPV4 (228), IPV6 (229), SLL2 (276) and
 * an unsupported one (147), checks: LT_OK, offset + length <= caplen, only the flags strip may
 * set (MALFORMED, NON_IP, FRAGMENT, UNSUPPORTED_LINKTYPE), FRAME mode = whole capture, no
 * flags, and UNSUPPORTED_LINKTYPE exactly for the unsupported type (then the whole capture).
 * Unknown strip modes (-1, 4) must give LT_ERR_ARG.
 */
#include "fuzz_common.h"

static const uint32_t linktypes[] = {0, 1, 101, 108, 113, 228, 229, 276, 147};
#define STRIP_FLAGS (LT_FLAG_MALFORMED | LT_FLAG_NON_IP | LT_FLAG_FRAGMENT | LT_FLAG_UNSUPPORTED_LINKTYPE)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4 || size - 4 > 0xFFFFFFFFu) return 0;
    uint32_t wire_len = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    const uint32_t caplen = (uint32_t)(size - 4);
    uint8_t *frame = malloc(caplen ? caplen : 1);
    if (!frame) return 0;
    memcpy(frame, data + 4, caplen);
    /* Also try the frame as uncut (wire == caplen) and the drawn wire length. */
    const uint32_t wires[2] = {caplen, wire_len};
    for (size_t w = 0; w < 2; w++)
        for (size_t t = 0; t < sizeof linktypes / sizeof linktypes[0]; t++)
            for (int strip = LT_STRIP_FRAME; strip <= LT_STRIP_RDMA; strip++) {
                uint32_t off = 0xDEADBEEF, len = 0xDEADBEEF;
                uint16_t fl = 0xBEEF;
                int st = lt_strip(strip, linktypes[t], frame, caplen, wires[w], &off, &len, &fl);
                FUZZ_CHECK(st == LT_OK, "strip %d linktype %u: status %d", strip, linktypes[t], st);
                FUZZ_CHECK(off <= caplen && len <= caplen - off,
                           "strip %d linktype %u caplen %u wire %u: offset %u + length %u > caplen", strip,
                           linktypes[t], caplen, wires[w], off, len);
                FUZZ_CHECK((fl & ~STRIP_FLAGS) == 0, "strip %d linktype %u: flags 0x%x", strip, linktypes[t], fl);
                if (strip == LT_STRIP_FRAME)
                    FUZZ_CHECK(off == 0 && len == caplen && fl == 0, "frame mode: %u+%u flags 0x%x", off, len, fl);
                else if (linktypes[t] == 147)
                    FUZZ_CHECK(off == 0 && len == caplen && fl == LT_FLAG_UNSUPPORTED_LINKTYPE,
                               "unsupported linktype: %u+%u flags 0x%x", off, len, fl);
                else
                    FUZZ_CHECK(!(fl & LT_FLAG_UNSUPPORTED_LINKTYPE), "linktype %u flagged unsupported",
                               linktypes[t]);
            }
    uint32_t off, len;
    uint16_t fl;
    FUZZ_CHECK(lt_strip(-1, 1, frame, caplen, caplen, &off, &len, &fl) == LT_ERR_ARG, "strip -1 accepted");
    FUZZ_CHECK(lt_strip(4, 1, frame, caplen, caplen, &off, &len, &fl) == LT_ERR_ARG, "strip 4 accepted");
    free(frame);
    return 0;
}
