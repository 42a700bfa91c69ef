/*
 * CPU feature probes: which instruction-set extensions this machine (and its OS) can run. The
 * digest families' path tables (digest_*.c) name these as each path's `supported` test; dispatch.c
 * calls them through the tables. CPUID via GCC's __builtin_cpu_supports on x86-64 (which also
 * checks that the OS saves the AVX-512 state), the hwcaps on AArch64; every probe of another
 * architecture's extension is 0.
 */
#include "lt_internal.h"

#if LT_X86_PATHS
#include <cpuid.h>

static int cpu_sha_ni(void) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 29) & 1;
}
int lt_cpu_has_aesni_pclmul(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
}
int lt_cpu_has_sha_ni(void) {
    __builtin_cpu_init();
    return cpu_sha_ni() && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3");
}
int lt_cpu_has_sse41(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3");
}
int lt_cpu_has_avx512vl(void) {
    __builtin_cpu_init();  /* also checks that the OS saves the AVX-512 state */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && lt_cpu_has_sse41();
}
int lt_cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
int lt_cpu_has_avx512_mb(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && lt_cpu_has_avx2();
}
int lt_cpu_has_vpclmul_avx512(void) {
    __builtin_cpu_init();  /* GMAC: masked byte loads (BW), zmm VPCLMULQDQ; AES-NI for the key setup */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq") && lt_cpu_has_aesni_pclmul();
}
int lt_cpu_has_vaes_avx512(void) {
    __builtin_cpu_init();  /* the window accumulator: zmm AESENC, ymm cells; AES-NI for the pads */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vaes") &&
           lt_cpu_has_aesni_pclmul();
}
#else
int lt_cpu_has_vaes_avx512(void) { return 0; }
int lt_cpu_has_avx2(void) { return 0; }
int lt_cpu_has_avx512_mb(void) { return 0; }
int lt_cpu_has_vpclmul_avx512(void) { return 0; }
int lt_cpu_has_aesni_pclmul(void) { return 0; }
int lt_cpu_has_sha_ni(void) { return 0; }
int lt_cpu_has_sse41(void) { return 0; }
int lt_cpu_has_avx512vl(void) { return 0; }
#endif

#if LT_NEON_PATHS
#if defined(__linux__)
#include <sys/auxv.h>
#endif
/* Advanced SIMD is part of the AArch64 base architecture; the Linux hwcap check is for completeness
 * (other systems have no getauxval). */
int lt_cpu_has_neon(void) {
#if defined(__linux__) && defined(HWCAP_ASIMD)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
    return 1;
#endif
}
#else
int lt_cpu_has_neon(void) { return 0; }
#endif
