/*
 * Kernel-bypass frame sources (AF_XDP: native/bypass/source_xdp.c, DPDK: native/bypass/source_dpdk.c).
 *
 * Each is built as its own small cffi extension module (ledgertool._source_xdp, ._source_dpdk)
 * and only where pkg-config finds its libraries (native/build_ffi.py), so the main extension
 * (ledgertool._native) never links libxdp, libbpf or DPDK and imports on any machine. A source
 * module opens its state and hands Python two pointers, `src` and its `lt_source_ops`; Python
 * passes them to lt_reader_open_source() of the main extension, which wraps them in an lt_reader
 * exactly like the AF_PACKET source (lt_reader_close calls ops->close(src)). From then on the
 * engine calls the source's next() directly, through the function pointer.
 *
 * Both modules are compiled from the same ledgertool.h and lt_internal.h as the main one;
 * LT_SOURCE_LAYOUT is compared at open so a stale module built against other struct layouts is
 * refused instead of corrupting frames.
 *
 * The CDEF blocks of source_xdp.h / source_dpdk.h are what cffi sees of each module.
 */
#ifndef LT_SOURCE_BYPASS_H
#define LT_SOURCE_BYPASS_H

#include "lt_internal.h"

#define LT_SOURCE_LAYOUT \
    ((uint32_t)(sizeof(lt_frame) << 20 | sizeof(lt_reader_info) << 8 | sizeof(lt_source_ops)))

#endif
