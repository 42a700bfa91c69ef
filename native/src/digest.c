/* The public digest entry points: one message (lt_digest), a batch through the engine's batch
 * entry (lt_digest_many), and the published-vector entry points of ledgertool_testing.h. Each
 * keys a context with the CPU path dispatch.c selected; the per-algorithm code sits in
 * digest_<family>[_<isa>].c. */
#include "ledgertool.h"
#include "ledgertool_testing.h"
#include "lt_internal.h"

int lt_digest(int algorithm, const uint8_t *key, const uint8_t *msg, size_t len, uint8_t *out) {
    lt_dctx c;
    int st = lt_dctx_init(&c, algorithm, key);
    if (st != LT_OK) return st;
    lt_dctx_run(&c, msg, len, out);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

int lt_digest_many(int algorithm, const uint8_t *key, const uint8_t *const *msgs, const uint32_t *lens, size_t n,
                   uint8_t *out, size_t out_stride) {
    lt_dctx c;
    int st = lt_dctx_init(&c, algorithm, key);
    if (st != LT_OK) return st;
    if (n && (!msgs || !lens || !out || out_stride < c.out_len || n > SIZE_MAX / out_stride)) {
        lt_wipe(&c, sizeof c);
        return LT_ERR_ARG;
    }
    lt_dctx_run_many(&c, msgs, lens, n, out, out_stride);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

int lt_gmac_aes128(const uint8_t *key, const uint8_t *iv, const uint8_t *aad, size_t len, uint8_t *tag) {
    const lt_cpu_impl *i = lt_dispatch_impl(LT_ALG_AES_128_GMAC);
    lt_dctx c;
    memset(&c, 0, sizeof c);
    c.algorithm = LT_ALG_AES_128_GMAC;
    c.out_len = 16;
    i->init(&c, key, 16, iv);
    i->digest(&c, aad, len, tag);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}

int lt_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len, uint8_t *out) {
    const lt_cpu_impl *i = lt_dispatch_impl(LT_ALG_HMAC_SHA256_128);
    lt_dctx c;
    memset(&c, 0, sizeof c);
    c.algorithm = LT_ALG_HMAC_SHA256_128;
    c.out_len = 32;
    i->init(&c, key, key_len, NULL);
    i->digest(&c, msg, len, out);
    lt_wipe(&c, sizeof c);
    return LT_OK;
}
