/*
 * HMAC-SHA-256 (RFC 2104 over FIPS 180-4 SHA-256), 32-byte key, output truncated to the leftmost
 * 16 bytes (RFC 2104 section 5, RFC 4231 section 4.1). The inner and outer pad states are
 * compressed once per key, so a frame costs ceil((len + 9) / 64) + 1 compressions.
 *
 * Paths differ only in the SHA-256 compression function (sha256.h): portable C, or sha-ni.
 */
#include "ledgertool.h"
#include "lt_internal.h"
#include "sha256.h"

static void hmac_init_with(sha256_blocks_fn blocks, lt_dctx *c, const uint8_t *key, size_t key_len) {
    uint8_t k[64] = {0}, pad[64];
    if (key_len > 64) {  /* RFC 2104: longer keys are hashed first */
        uint32_t st[8];
        memcpy(st, SHA256_H0, sizeof st);
        sha256_finish(blocks, st, 0, key, key_len, k);
    } else if (key_len) {
        memcpy(k, key, key_len);
    }
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    memcpy(c->u.hmac.istate, SHA256_H0, 32);
    blocks(c->u.hmac.istate, pad, 1);
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    memcpy(c->u.hmac.ostate, SHA256_H0, 32);
    blocks(c->u.hmac.ostate, pad, 1);
    lt_wipe(k, sizeof k);
    lt_wipe(pad, sizeof pad);
}

static void hmac_digest_with(sha256_blocks_fn blocks, const lt_dctx *c, const uint8_t *msg, size_t len,
                             uint8_t *out) {
    uint32_t st[8];
    uint8_t inner[32], full[32];
    memcpy(st, c->u.hmac.istate, 32);
    sha256_finish(blocks, st, 64, msg, len, inner);
    memcpy(st, c->u.hmac.ostate, 32);
    sha256_finish(blocks, st, 64, inner, 32, full);
    memcpy(out, full, c->out_len);
}

static void hmac_init_portable(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv) {
    hmac_init_with(sha256_blocks_portable, c, key, key_len);
}
static void hmac_digest_portable(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    hmac_digest_with(sha256_blocks_portable, c, msg, len, out);
}

#if LT_X86_PATHS
static void hmac_init_shani(lt_dctx *c, const uint8_t *key, size_t key_len, const uint8_t *iv) {
    hmac_init_with(sha256_blocks_shani, c, key, key_len);
}
static void hmac_digest_shani(const lt_dctx *c, const uint8_t *msg, size_t len, uint8_t *out) {
    hmac_digest_with(sha256_blocks_shani, c, msg, len, out);
}
#endif

const lt_cpu_impl lt_hmac_impls[] = {
#if LT_X86_PATHS
    {"sha-ni", lt_cpu_has_sha_ni, hmac_init_shani, hmac_digest_shani, NULL},
#endif
    {"portable", NULL, hmac_init_portable, hmac_digest_portable, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
