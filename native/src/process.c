/*
 * Process hardening while secret keys are in memory (docs/threat-model.md, "Keys in memory").
 *
 * A core dump is a copy of the address space: the digest subkeys, the engine's expanded keys and
 * the signing keys would land in a file that outlives the process (and that crash reporters ship
 * elsewhere). Both switches are used because each covers a case the other does not: RLIMIT_CORE 0
 * is what a core_pattern file honours and what systemd-coredump checks, PR_SET_DUMPABLE 0 stops
 * the kernel from dumping at all (whatever the pattern) and keeps same-user debuggers
 * (ptrace, /proc/PID/mem) out. Both last until the process exits; the hard limit is lowered too,
 * so nothing in the process raises it again.
 */
#include <errno.h>
#include <sys/resource.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "ledgertool.h"
#include "lt_internal.h"

int lt_no_core_dumps(char *err, size_t errlen) {
    const struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) {
        lt_errf(err, errlen, "setrlimit(RLIMIT_CORE, 0): %s", strerror(errno));
        return LT_ERR_IO;
    }
#if defined(__linux__)
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        lt_errf(err, errlen, "prctl(PR_SET_DUMPABLE, 0): %s", strerror(errno));
        return LT_ERR_IO;
    }
#endif
    return LT_OK;
}
