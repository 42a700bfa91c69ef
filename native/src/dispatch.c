/*
 * The algorithm registry (ids, names, digest and key sizes) and CPU path dispatch. Each digest
 * family (digest_<family>.c) has one table of implementations, best first, portable last; the
 * CPU feature probes the tables name are in cpu.c. The choice per algorithm is made once, at
 * first use, from CPUID (x86-64) or the AArch64 hwcaps (NEON); LEDGERTOOL_CPU_PATH can force a
 * path (docs/algorithms.md, "CPU paths"):
 *
 *   LEDGERTOOL_CPU_PATH=portable             every algorithm on its portable C path
 *   LEDGERTOOL_CPU_PATH=aesni-pclmul         every algorithm that has that path (others keep theirs)
 *   LEDGERTOOL_CPU_PATH=hmac-sha256-128=portable,aes-128-gmac=aesni-pclmul   per algorithm
 *
 * A forced path the CPU cannot run is not taken: the default stays and lt_cpu_path_note() says
 * why, so lt_cpu_path() always names the code that really runs. Tests switch paths in-process
 * with lt_cpu_path_force().
 */
#include <pthread.h>
#include <stdlib.h>

#include "ledgertool.h"
#include "lt_internal.h"

#define LT_ALG_MAX 8

static const char *const alg_names[LT_ALG_MAX + 1] = {
    NULL, "siphash-1-3-128", "siphash-2-4-128", "siphash-1-3-64", "siphash-2-4-64",
    "aes-128-gmac", "blake3-keyed-128", "blake3-keyed-256", "hmac-sha256-128",
};

/* ---- the algorithm registry: sizes are authoritative here ---- */
size_t lt_digest_size(int algorithm) {
    switch (algorithm) {
    case LT_ALG_SIPHASH_1_3_128:
    case LT_ALG_SIPHASH_2_4_128:
    case LT_ALG_AES_128_GMAC:
    case LT_ALG_BLAKE3_KEYED_128:
    case LT_ALG_HMAC_SHA256_128: return 16;
    case LT_ALG_BLAKE3_KEYED_256: return 32;
    case LT_ALG_SIPHASH_1_3_64:
    case LT_ALG_SIPHASH_2_4_64: return 8;
    default: return 0;
    }
}

size_t lt_key_size(int algorithm) {
    switch (algorithm) {
    case LT_ALG_SIPHASH_1_3_128:
    case LT_ALG_SIPHASH_2_4_128:
    case LT_ALG_SIPHASH_1_3_64:
    case LT_ALG_SIPHASH_2_4_64:
    case LT_ALG_AES_128_GMAC: return 16;
    case LT_ALG_BLAKE3_KEYED_128:
    case LT_ALG_BLAKE3_KEYED_256:
    case LT_ALG_HMAC_SHA256_128: return 32;
    default: return 0;
    }
}

size_t lt_record_size(int algorithm) {
    size_t d = lt_digest_size(algorithm);
    return d ? LT_RECORD_FIXED + d : 0;
}

/* ---- path tables and the choice per algorithm ---- */
static const lt_cpu_impl *family(int algorithm) {
    switch (algorithm) {
    case LT_ALG_SIPHASH_1_3_128:
    case LT_ALG_SIPHASH_2_4_128:
    case LT_ALG_SIPHASH_1_3_64:
    case LT_ALG_SIPHASH_2_4_64: return lt_siphash_impls;
    case LT_ALG_AES_128_GMAC: return lt_gmac_impls;
    case LT_ALG_BLAKE3_KEYED_128:
    case LT_ALG_BLAKE3_KEYED_256: return lt_blake3_impls;
    case LT_ALG_HMAC_SHA256_128: return lt_hmac_impls;
    default: return NULL;
    }
}

static int usable(const lt_cpu_impl *i) { return i->supported == NULL || i->supported(); }

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int selected[LT_ALG_MAX + 1];   /* index into the family table */
static int defaults[LT_ALG_MAX + 1];
static char note[256];

static int find_path(int algorithm, const char *name, size_t n) {
    const lt_cpu_impl *t = family(algorithm);
    for (int i = 0; t && t[i].name; i++)
        if (strlen(t[i].name) == n && strncmp(t[i].name, name, n) == 0) return i;
    return -1;
}

static void apply_env_item(const char *item, size_t n) {
    const char *eq = memchr(item, '=', n);
    const char *path = eq ? eq + 1 : item;
    size_t plen = eq ? n - (size_t)(eq + 1 - item) : n;
    int matched = 0;
    for (int a = 1; a <= LT_ALG_MAX; a++) {
        if (eq && (strlen(alg_names[a]) != (size_t)(eq - item) || strncmp(alg_names[a], item, (size_t)(eq - item))))
            continue;
        int i = find_path(a, path, plen);
        if (i < 0) continue;
        matched = 1;
        if (usable(&family(a)[i])) {
            selected[a] = i;
        } else if (!note[0]) {
            snprintf(note, sizeof note, "LEDGERTOOL_CPU_PATH: %s path %.*s needs CPU features this machine "
                     "lacks; using %s", alg_names[a], (int)plen, path, family(a)[selected[a]].name);
        }
    }
    if (!matched && !note[0])
        snprintf(note, sizeof note, "LEDGERTOOL_CPU_PATH: no algorithm has a CPU path named %.*s; ignored",
                 (int)n, item);
}

static void init_dispatch(void) {
    for (int a = 1; a <= LT_ALG_MAX; a++) {
        const lt_cpu_impl *t = family(a);
        int i = 0;
        while (t[i].name && !usable(&t[i])) i++;
        defaults[a] = selected[a] = t[i].name ? i : 0;
    }
    const char *env = getenv("LEDGERTOOL_CPU_PATH");
    if (!env || !*env) return;
    for (const char *p = env; *p;) {
        size_t n = strcspn(p, ",");
        if (n) apply_env_item(p, n);
        p += n;
        if (*p == ',') p++;
    }
}

const lt_cpu_impl *lt_dispatch_impl(int algorithm) {
    if (algorithm < 1 || algorithm > LT_ALG_MAX) return NULL;
    pthread_once(&once, init_dispatch);
    pthread_mutex_lock(&lock);
    const lt_cpu_impl *i = &family(algorithm)[selected[algorithm]];
    pthread_mutex_unlock(&lock);
    return i;
}

const char *lt_cpu_path(int algorithm) {
    const lt_cpu_impl *i = lt_dispatch_impl(algorithm);
    return i ? i->name : "";
}

const char *lt_cpu_path_note(void) {
    pthread_once(&once, init_dispatch);
    return note;
}

int lt_cpu_paths(int algorithm, char *buf, size_t len) {
    if (algorithm < 1 || algorithm > LT_ALG_MAX || !buf || len == 0) return LT_ERR_ARG;
    const lt_cpu_impl *t = family(algorithm);
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; t[i].name; i++) {
        if (!usable(&t[i])) continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "", t[i].name);
        if (w < 0 || (size_t)w >= len - used) return LT_ERR_ARG;
        used += (size_t)w;
    }
    return LT_OK;
}

int lt_cpu_path_force(int algorithm, const char *path) {
    if (algorithm < 1 || algorithm > LT_ALG_MAX) return LT_ERR_ARG;
    pthread_once(&once, init_dispatch);
    int i = (path && *path) ? find_path(algorithm, path, strlen(path)) : defaults[algorithm];
    if (i < 0 || !usable(&family(algorithm)[i])) return LT_ERR_ARG;
    pthread_mutex_lock(&lock);
    selected[algorithm] = i;
    pthread_mutex_unlock(&lock);
    return LT_OK;
}

int lt_dctx_init(lt_dctx *c, int algorithm, const uint8_t *key) {
    const lt_cpu_impl *i = lt_dispatch_impl(algorithm);
    if (!i) return LT_ERR_ARG;
    memset(c, 0, sizeof *c);
    c->algorithm = algorithm;
    c->out_len = lt_digest_size(algorithm);
    c->path = i->name;
    c->fn = i->digest;
    c->many = i->many;
    i->init(c, key, lt_key_size(algorithm), NULL);
    return LT_OK;
}
