/*
 * Shared helpers for the libFuzzer harnesses in this folder (docs/fuzzing.md).
 *
 * lt_reader_open() takes a path, so each input is written to an anonymous memfd and opened
 * through /proc/self/fd/N: no file on disk, nothing left behind. A memfd is a regular file, so
 * the reader's S_ISREG check and mmap behave as they do on a real capture.
 */
#ifndef LT_FUZZ_COMMON_H
#define LT_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ledgertool.h"

/* Report a broken invariant as a crash libFuzzer records (abort, with a message first). */
#define FUZZ_CHECK(cond, ...)                                                              \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz invariant failed: %s (%s:%d): ", #cond, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* Write `data` to a fresh memfd; fills `path` with its /proc/self/fd name. Returns the fd or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t pathlen) {
    int fd = memfd_create("lt-fuzz", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

/* Every status the public API documents. */
static inline int fuzz_known_status(int st) {
    return st == LT_OK || st == LT_EOF || st == LT_ERR_IO || st == LT_ERR_FORMAT || st == LT_ERR_CORRUPT ||
           st == LT_ERR_ARG || st == LT_ERR_NOMEM;
}

#endif
