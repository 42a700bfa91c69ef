/* Exact instruction counts of the digest hot path (no Python under valgrind):
 *   gcc -O1 scripts/digest_callgrind_driver.c -o /tmp/drv $PWD/ledgertool/_native.cpython-311-x86_64-linux-gnu.so \
 *       -L$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))') -lpython3.11 \
 *       -Wl,--unresolved-symbols=ignore-all
 *   LD_LIBRARY_PATH=<that LIBDIR> valgrind --tool=callgrind --toggle-collect=bench_one_thread \
 *       /tmp/drv avx2-mb 1500 2796
 * Ir / (count * size) is instructions per byte. Arguments: CPU path, message size, count
 * (algorithm id in ALG, default 6 = blake3-keyed-128). valgrind does not decode AVX-512. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int lt_cpu_path_force(int algorithm, const char *path);
int lt_bench_digest_batch(int algorithm, const uint8_t *key, const uint8_t *buf, size_t buf_len, size_t size,
                          uint64_t count, unsigned threads, size_t batch, uint64_t *elapsed_ns, uint64_t *thread_ns,
                          uint8_t *sink);

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PATH SIZE COUNT\n", argv[0]);
        return 2;
    }
    int alg = getenv("ALG") ? atoi(getenv("ALG")) : 6;
    size_t size = strtoul(argv[2], NULL, 10);
    uint64_t count = strtoull(argv[3], NULL, 10);
    if (lt_cpu_path_force(alg, argv[1]) != 0) {
        fprintf(stderr, "%s: path %s not available\n", argv[0], argv[1]);
        return 2;
    }
    uint8_t key[32], sink[16];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 7 + 1);
    size_t buf_len = size + 4096;
    uint8_t *buf = malloc(buf_len);
    if (!buf) return 2;
    for (size_t i = 0; i < buf_len; i++) buf[i] = (uint8_t)(i * 131 + 7);
    uint64_t ns;
    int rc = lt_bench_digest_batch(alg, key, buf, buf_len, size, count, 1, 256, &ns, NULL, sink);
    free(buf);
    return rc ? 1 : 0;
}
