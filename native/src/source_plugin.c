/* The main extension's side of the kernel-bypass sources (source_bypass.h): wrap a source that
 * another native module implements in an lt_reader. */
#include <stdlib.h>

#include "ledgertool.h"
#include "source_bypass.h"

int lt_reader_open_source(const void *ops, void *src, int format, uint32_t layout, lt_reader **out) {
    *out = NULL;
    const lt_source_ops *o = ops;
    if (!o || !o->next || !src || layout != LT_SOURCE_LAYOUT) return LT_ERR_ARG;
    lt_reader *r = lt_reader_from_source(o, src, format);
    if (!r) return LT_ERR_NOMEM;
    *out = r;
    return LT_OK;
}
