/*
 * Standalone self-test of the native digest code: every CPU path this machine can run against the
 * published vectors of tests/vectors/ (embedded by build_selftest.py), and every non-portable path
 * against the portable path on deterministic random batches of mixed lengths. It links the digest
 * sources only and needs no Python at run time, so a cross-compiled build runs under qemu-user
 * (arm64: neon-mb vs portable) and a native build checks the x86 paths the same way. Built by
 * native/tests/build_selftest.py; run by tests/test_arm64.py.
 *
 *   selftest                 vectors + random cross-check; exit 0 all equal, 1 on a mismatch
 *   selftest --corrupt       the same with one bit of every reference flipped: must exit 1
 *                            (proves the comparisons run)
 *   selftest --paths         per algorithm: the path in use (after LEDGERTOOL_CPU_PATH) and the
 *                            paths this CPU can run
 *   selftest --digest FILE   digest the messages of FILE on every algorithm and path, one line
 *                            "ALGORITHM PATH INDEX HEX" each. FILE: a 32-byte key (SipHash and
 *                            GMAC use its first 16 bytes), then records of a u32le length and the
 *                            bytes. For checks against independent references in Python.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ledgertool.h"
#include "ledgertool_testing.h"
#include "vectors.h"

#define NALG 8
static const char *const ALG[NALG + 1] = {
    NULL, "siphash-1-3-128", "siphash-2-4-128", "siphash-1-3-64", "siphash-2-4-64",
    "aes-128-gmac", "blake3-keyed-128", "blake3-keyed-256", "hmac-sha256-128",
};

static int corrupt;            /* --corrupt: flip a bit of every reference value */
static unsigned long checks, failures;

static void die(const char *what) {
    fprintf(stderr, "selftest: %s\n", what);
    exit(2);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory");
    return p;
}

static size_t unhex(const char *h, uint8_t *out, size_t cap) {
    size_t n = strlen(h) / 2;
    if (n > cap) die("vector longer than its buffer");
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) die("bad hex in vectors.h");
        out[i] = (uint8_t)v;
    }
    return n;
}

static void hexline(const uint8_t *p, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

/* one comparison; `want` is the reference (flipped under --corrupt) */
static void expect(const uint8_t *got, const uint8_t *want_in, size_t n, const char *what, const char *alg,
                   const char *path, long index, unsigned len) {
    uint8_t want[64];
    memcpy(want, want_in, n);
    if (corrupt) want[0] ^= 1;
    checks++;
    if (memcmp(got, want, n) == 0) return;
    if (++failures <= 20) {
        char g[129], w[129];
        hexline(got, n, g);
        hexline(want, n, w);
        fprintf(stderr, "selftest: MISMATCH %s %s path %s message %ld (%u bytes): got %s want %s\n", what, alg,
                path, index, len, g, w);
    }
}

/* paths this CPU can run for an algorithm, best first, portable last */
static int paths_of(int alg, char names[8][32]) {
    char buf[256];
    if (lt_cpu_paths(alg, buf, sizeof buf) != LT_OK) die("lt_cpu_paths failed");
    int n = 0;
    for (char *tok = strtok(buf, ","); tok && n < 8; tok = strtok(NULL, ",")) snprintf(names[n++], 32, "%s", tok);
    return n;
}

static void force(int alg, const char *path) {
    if (lt_cpu_path_force(alg, path) != LT_OK || (path && strcmp(lt_cpu_path(alg), path) != 0)) {
        fprintf(stderr, "selftest: cannot force %s onto path %s\n", ALG[alg], path ? path : "(default)");
        exit(2);
    }
}

/* ---- published vectors, on every path ---- */

static void vectors_siphash(void) {
    uint8_t key[16], msg[64], want[16], got[64 * 24];
    const uint8_t *msgs[64];
    uint32_t lens[64];
    unhex(SIP_KEY, key, sizeof key);
    for (int i = 0; i < 64; i++) {
        msg[i] = (uint8_t)i;
        msgs[i] = msg;  /* message i is the first i bytes 00 01 .. */
        lens[i] = (uint32_t)i;
    }
    static const int algs[2] = {LT_ALG_SIPHASH_2_4_64, LT_ALG_SIPHASH_2_4_128};
    for (int a = 0; a < 2; a++) {
        int alg = algs[a];
        size_t ds = lt_digest_size(alg);
        const char *const *table = ds == 8 ? SIP24_64 : SIP24_128;
        char names[8][32];
        int np = paths_of(alg, names);
        for (int p = 0; p < np; p++) {
            force(alg, names[p]);
            /* one batch of all 64 (every tail length, lanes ending at different steps), stride 24 */
            if (lt_digest_many(alg, key, msgs, lens, 64, got, 24) != LT_OK) die("lt_digest_many failed");
            for (int i = 0; i < 64; i++) {
                unhex(table[i], want, sizeof want);
                expect(got + 24 * i, want, ds, "vector (batch)", ALG[alg], names[p], i, lens[i]);
                uint8_t one[16];
                lt_digest(alg, key, msg, (size_t)i, one);
                expect(one, want, ds, "vector (single)", ALG[alg], names[p], i, lens[i]);
            }
        }
        force(alg, NULL);
    }
}

static void vectors_blake3(void) {
    size_t ncase = sizeof B3_CASES / sizeof B3_CASES[0], maxlen = 0;
    for (size_t i = 0; i < ncase; i++)
        if (B3_CASES[i].len > maxlen) maxlen = B3_CASES[i].len;
    uint8_t *in = xmalloc(maxlen), *got = xmalloc(ncase * 32), key[32], want[32];
    const uint8_t **msgs = xmalloc(ncase * sizeof *msgs);
    uint32_t *lens = xmalloc(ncase * sizeof *lens);
    for (size_t i = 0; i < maxlen; i++) in[i] = (uint8_t)(i % 251);
    if (strlen(B3_KEY) != 32) die("BLAKE3 vector key is not 32 bytes");
    memcpy(key, B3_KEY, 32);
    for (size_t i = 0; i < ncase; i++) {
        msgs[i] = in;
        lens[i] = B3_CASES[i].len;
    }
    static const int algs[2] = {LT_ALG_BLAKE3_KEYED_128, LT_ALG_BLAKE3_KEYED_256};
    for (int a = 0; a < 2; a++) {
        int alg = algs[a];
        size_t ds = lt_digest_size(alg);  /* the 128-bit variant is the leading 16 bytes */
        char names[8][32];
        int np = paths_of(alg, names);
        for (int p = 0; p < np; p++) {
            force(alg, names[p]);
            if (lt_digest_many(alg, key, msgs, lens, ncase, got, 32) != LT_OK) die("lt_digest_many failed");
            for (size_t i = 0; i < ncase; i++) {
                unhex(B3_CASES[i].hash32, want, sizeof want);
                expect(got + 32 * i, want, ds, "vector (batch)", ALG[alg], names[p], (long)i, lens[i]);
                uint8_t one[32];
                lt_digest(alg, key, in, lens[i], one);
                expect(one, want, ds, "vector (single)", ALG[alg], names[p], (long)i, lens[i]);
            }
        }
        force(alg, NULL);
    }
    free(in); free(got); free(msgs); free(lens);
}

static void vectors_hmac_gmac(void) {
    char names[8][32];
    int np = paths_of(LT_ALG_HMAC_SHA256_128, names);
    for (int p = 0; p < np; p++) {
        force(LT_ALG_HMAC_SHA256_128, names[p]);
        for (size_t i = 0; i < sizeof HMAC_CASES / sizeof HMAC_CASES[0]; i++) {
            uint8_t key[256], data[256], want[32], got[32];
            size_t kl = unhex(HMAC_CASES[i].key, key, sizeof key), dl = unhex(HMAC_CASES[i].data, data, sizeof data);
            size_t wl = unhex(HMAC_CASES[i].mac, want, sizeof want);  /* case 5: 16 bytes published */
            lt_hmac_sha256(key, kl, data, dl, got);
            expect(got, want, wl, "RFC 4231 vector", "hmac-sha256", names[p], HMAC_CASES[i].id, (unsigned)dl);
        }
    }
    force(LT_ALG_HMAC_SHA256_128, NULL);
    np = paths_of(LT_ALG_AES_128_GMAC, names);
    for (int p = 0; p < np; p++) {
        force(LT_ALG_AES_128_GMAC, names[p]);
        for (size_t i = 0; i < sizeof GMAC_CASES / sizeof GMAC_CASES[0]; i++) {
            uint8_t key[16], iv[12], aad[256], want[16], got[16];
            unhex(GMAC_CASES[i].key, key, sizeof key);
            if (unhex(GMAC_CASES[i].iv, iv, sizeof iv) != 12) die("GMAC vector IV is not 96 bits");
            size_t al = unhex(GMAC_CASES[i].aad, aad, sizeof aad);
            size_t wl = unhex(GMAC_CASES[i].tag, want, sizeof want);  /* truncated tags: leading bytes */
            lt_gmac_aes128(key, iv, aad, al, got);
            expect(got, want, wl, GMAC_CASES[i].name, "aes-128-gmac", names[p], (long)i, (unsigned)al);
        }
    }
    force(LT_ALG_AES_128_GMAC, NULL);
}

/* ---- random batches: every path against the portable path ---- */

static uint64_t rng_state = 0x6c65646765727431ULL;  /* fixed: the run is reproducible */
static uint64_t rnd(void) {                            /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static uint32_t below(uint32_t n) { return (uint32_t)(rnd() % n); }
static void fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd();
}

/* a batch's messages, either at random misalignments in one heap buffer or each ending right at a
 * PROT_NONE page (a lane that read past its message's end would fault) */
typedef struct {
    size_t n;
    uint32_t *lens;
    const uint8_t **msgs;
    uint8_t *heap;
    void **maps;
    size_t *map_len;
} batch;

static void batch_make(batch *b, const uint32_t *lens, size_t n, int guarded) {
    long page = sysconf(_SC_PAGESIZE);
    memset(b, 0, sizeof *b);
    b->n = n;
    b->lens = xmalloc(n * sizeof *b->lens);
    b->msgs = xmalloc(n * sizeof *b->msgs);
    memcpy(b->lens, lens, n * sizeof *lens);
    if (!guarded) {
        size_t total = 0;
        for (size_t i = 0; i < n; i++) total += lens[i] + 16;
        b->heap = xmalloc(total);
        size_t pos = 0;
        for (size_t i = 0; i < n; i++) {
            pos += below(16);  /* any alignment */
            fill(b->heap + pos, lens[i]);
            b->msgs[i] = b->heap + pos;
            pos += lens[i];
        }
        return;
    }
    b->maps = xmalloc(n * sizeof *b->maps);
    b->map_len = xmalloc(n * sizeof *b->map_len);
    for (size_t i = 0; i < n; i++) {
        size_t data = ((size_t)lens[i] + (size_t)page - 1) / (size_t)page * (size_t)page;
        b->map_len[i] = data + (size_t)page;
        uint8_t *m = mmap(NULL, b->map_len[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) die("mmap failed");
        if (mprotect(m + data, (size_t)page, PROT_NONE) != 0) die("mprotect failed");
        b->maps[i] = m;
        b->msgs[i] = m + data - lens[i];
        fill((uint8_t *)b->msgs[i], lens[i]);
    }
}

static void batch_free(batch *b) {
    if (b->maps)
        for (size_t i = 0; i < b->n; i++) munmap(b->maps[i], b->map_len[i]);
    free(b->maps); free(b->map_len); free(b->heap); free(b->lens); free(b->msgs);
}

static size_t shape(size_t k, uint32_t *lens, size_t cap) {
    /* fixed shapes first: equal ends, idle lanes, every tail, one long lane with many refills, the
     * SipHash 8-word fast path edges and the BLAKE3 block and chunk edges; then random batches */
    static const uint32_t edges[] = {0, 1, 7, 8, 9, 63, 64, 65, 71, 72, 127, 128, 129, 1023, 1024, 1025, 2048, 4097};
    size_t n = 0;
    switch (k) {
    case 0: return 0;
    case 1: lens[n++] = 0; return n;
    case 2: for (; n < 4; n++) lens[n] = 64; return n;
    case 3: for (; n < 5; n++) lens[n] = 64; return n;
    case 4: for (; n < 9; n++) lens[n] = 1500; return n;
    case 5: for (; n < 70; n++) lens[n] = (uint32_t)n; return n;
    case 6: for (; n < 17; n++) lens[n] = 0; return n;
    case 7: lens[n++] = 2000; for (; n < 9; n++) lens[n] = 0; lens[n++] = 1; return n;
    case 8: for (; n < sizeof edges / sizeof edges[0]; n++) lens[n] = edges[n]; return n;
    case 9: for (; n < 3; n++) lens[n] = 1024; return n;  /* short batch: a lane idle throughout */
    default: break;
    }
    n = 1 + below(300);
    if (n > cap) n = cap;
    for (size_t i = 0; i < n; i++) {
        switch (below(5)) {
        case 0: lens[i] = below(2001); break;
        case 1: lens[i] = below(25); break;
        case 2: lens[i] = 64; break;
        case 3: lens[i] = 1500; break;
        default: lens[i] = edges[below(sizeof edges / sizeof edges[0])]; break;
        }
    }
    return n;
}

#define NSHAPES 22
static void cross_check(void) {
    uint32_t lens[300];
    for (int alg = 1; alg <= NALG; alg++) {
        char names[8][32];
        int np = paths_of(alg, names);
        size_t ds = lt_digest_size(alg);
        unsigned long messages = 0;
        for (size_t k = 0; k < NSHAPES; k++) {
            size_t n = shape(k, lens, 300);
            batch b;
            batch_make(&b, lens, n, k % 2);
            uint8_t key[32];
            fill(key, sizeof key);
            uint8_t *want = xmalloc(n * 32);
            force(alg, "portable");
            for (size_t i = 0; i < n; i++) lt_digest(alg, key, b.msgs[i], b.lens[i], want + 32 * i);
            for (int p = 0; p < np; p++) {
                if (strcmp(names[p], "portable") == 0) continue;
                force(alg, names[p]);
                /* slots wider than the digest: bytes past it must stay untouched */
                size_t stride = ds + 8 * below(3);
                uint8_t *got = xmalloc(n * stride + 1);
                memset(got, 0xA5, n * stride + 1);
                if (lt_digest_many(alg, key, b.msgs, b.lens, n, got, stride) != LT_OK) die("lt_digest_many failed");
                for (size_t i = 0; i < n; i++) {
                    expect(got + stride * i, want + 32 * i, ds, "batch vs portable", ALG[alg], names[p], (long)i,
                           b.lens[i]);
                    for (size_t j = ds; j < stride; j++)
                        if (got[stride * i + j] != 0xA5) {
                            failures++;
                            fprintf(stderr, "selftest: %s path %s wrote past digest %zu of its slot\n", ALG[alg],
                                    names[p], i);
                            break;
                        }
                }
                if (got[n * stride] != 0xA5) {
                    failures++;
                    fprintf(stderr, "selftest: %s path %s wrote past the last slot\n", ALG[alg], names[p]);
                }
                /* the single-message code of the path too, on a few messages */
                for (size_t i = 0; i < n; i += 1 + n / 8) {
                    uint8_t one[32];
                    lt_digest(alg, key, b.msgs[i], b.lens[i], one);
                    expect(one, want + 32 * i, ds, "single vs portable", ALG[alg], names[p], (long)i, b.lens[i]);
                }
                free(got);
                messages += n;
            }
            free(want);
            batch_free(&b);
        }
        force(alg, NULL);
        char list[256];
        lt_cpu_paths(alg, list, sizeof list);
        printf("selftest: %s paths %s: %lu random messages on non-portable paths\n", ALG[alg], list, messages);
    }
}

/* ---- modes ---- */

static int mode_paths(void) {
    const char *note = lt_cpu_path_note();
    for (int alg = 1; alg <= NALG; alg++) {
        char list[256];
        lt_cpu_paths(alg, list, sizeof list);
        printf("%s %s %s\n", ALG[alg], lt_cpu_path(alg), list);
    }
    if (note[0]) printf("note %s\n", note);
    return 0;
}

static int mode_digest(const char *file) {
    FILE *f = fopen(file, "rb");
    if (!f) die("cannot open the --digest file");
    uint8_t key[32];
    if (fread(key, 1, 32, f) != 32) die("--digest file: no 32-byte key");
    size_t n = 0, cap = 64;
    uint8_t **msgs = xmalloc(cap * sizeof *msgs);
    uint32_t *lens = xmalloc(cap * sizeof *lens);
    uint8_t hdr[4];
    while (fread(hdr, 1, 4, f) == 4) {
        if (n == cap) {
            cap *= 2;
            msgs = realloc(msgs, cap * sizeof *msgs);
            lens = realloc(lens, cap * sizeof *lens);
            if (!msgs || !lens) die("out of memory");
        }
        lens[n] = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
        if (lens[n] > (1u << 24)) die("--digest file: message longer than 16 MiB");
        msgs[n] = xmalloc(lens[n]);
        if (fread(msgs[n], 1, lens[n], f) != lens[n]) die("--digest file: truncated message");
        n++;
    }
    fclose(f);
    uint8_t *out = xmalloc(n * 32);
    for (int alg = 1; alg <= NALG; alg++) {
        char names[8][32];
        int np = paths_of(alg, names);
        size_t ds = lt_digest_size(alg);
        for (int p = 0; p < np; p++) {
            force(alg, names[p]);
            if (lt_digest_many(alg, key, (const uint8_t *const *)msgs, lens, n, out, 32) != LT_OK)
                die("lt_digest_many failed");
            for (size_t i = 0; i < n; i++) {
                char h[65];
                hexline(out + 32 * i, ds, h);
                printf("%s %s %zu %s\n", ALG[alg], names[p], i, h);
            }
        }
        force(alg, NULL);
    }
    for (size_t i = 0; i < n; i++) free(msgs[i]);
    free(msgs); free(lens); free(out);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--paths") == 0) return mode_paths();
    if (argc == 3 && strcmp(argv[1], "--digest") == 0) return mode_digest(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--corrupt") == 0) corrupt = 1;
    else if (argc != 1) die("usage: selftest [--corrupt | --paths | --digest FILE]");
    vectors_siphash();
    vectors_blake3();
    vectors_hmac_gmac();
    unsigned long vec = checks;
    cross_check();
    printf("selftest: %lu vector checks, %lu random comparisons, %lu mismatches\n", vec, checks - vec, failures);
    if (failures) {
        printf("selftest: FAIL\n");
        return 1;
    }
    printf("selftest: OK\n");
    return 0;
}
