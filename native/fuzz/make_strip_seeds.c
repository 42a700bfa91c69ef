/*
 * Seed generator for fuzz_strip (not a fuzz target): reads capture files with the project's
 * reader and writes each distinct frame as one seed file, "<wire_len LE u32><captured bytes>",
 * the input format fuzz_strip expects.
 *   make_strip_seeds OUTDIR MAX_PER_FILE FILE...
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledgertool.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s OUTDIR MAX_PER_FILE FILE...\n", argv[0]);
        return 2;
    }
    const char *outdir = argv[1];
    unsigned long max = strtoul(argv[2], NULL, 10);
    unsigned long written = 0;
    for (int a = 3; a < argc; a++) {
        char err[256];
        lt_reader *r = NULL;
        if (lt_reader_open(argv[a], &r, err, sizeof err) != LT_OK) continue;
        lt_frame f[64];
        size_t n;
        unsigned long k = 0;
        while (k < max && lt_reader_next(r, f, 64, &n) == LT_OK) {
            for (size_t i = 0; i < n && k < max; i++, k++) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%d-%lu", outdir, a, k);
                FILE *o = fopen(path, "wb");
                if (!o) {
                    fprintf(stderr, "%s: %s\n", path, strerror(errno));
                    return 1;
                }
                uint8_t w[4] = {(uint8_t)f[i].wire_len, (uint8_t)(f[i].wire_len >> 8), (uint8_t)(f[i].wire_len >> 16),
                                (uint8_t)(f[i].wire_len >> 24)};
                fwrite(w, 1, 4, o);
                fwrite(f[i].data, 1, f[i].caplen, o);
                fclose(o);
                written++;
            }
        }
        lt_reader_close(r);
    }
    fprintf(stderr, "make_strip_seeds: %lu seeds in %s\n", written, outdir);
    return 0;
}
