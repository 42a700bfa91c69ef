#!/usr/bin/env bash
# Build and run the libFuzzer harnesses in native/fuzz/ (docs/fuzzing.md).
#
#   scripts/fuzz.sh [TARGET] [SECONDS] [-- extra libFuzzer flags]
#     TARGET   reader | strip | engine | merkle | recfile | python | all | build   (default: all; "build" only
#              compiles). python: the atheris harness over the Python parsers (scripts/fuzz_parsers.py)
#     SECONDS  run time per target (default 60)
#
# Environment:
#   LEDGERTOOL_CORPUS  the shared capture corpus (default: ../shared/corpus beside the repo);
#                      its files/ and derived/ are the seeds, read in place, never copied here
#   FUZZ_WORK          build and working folder, outside the repo (default /tmp/ledgertool-fuzz):
#                      bin/ the fuzzers, corpus-TARGET/ what each run grows, crashes-TARGET/ the
#                      crashers (crash-*, leak-*, timeout-*), log-TARGET.txt the last run's log
#   CC                 a clang with libFuzzer (default: clang; Debian: apt-get install clang)
#   FUZZ_JOBS          parallel fuzzing processes per target (default 1)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CORPUS=${LEDGERTOOL_CORPUS:-$REPO/../shared/corpus}
WORK=${FUZZ_WORK:-/tmp/ledgertool-fuzz}
CC=${CC:-clang}
JOBS=${FUZZ_JOBS:-1}
TARGET=${1:-all}
SECONDS_PER=${2:-60}
shift $(( $# >= 2 ? 2 : $# ))
[[ "${1:-}" == "--" ]] && shift
EXTRA=("$@")

case "$WORK" in "$REPO"|"$REPO"/*) echo "fuzz.sh: FUZZ_WORK must be outside the repo" >&2; exit 2;; esac
command -v "$CC" >/dev/null || { echo "fuzz.sh: $CC not found (apt-get install clang)" >&2; exit 2; }

SAN=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
CFLAGS=(-g -O1 -std=gnu11 -pthread -fno-strict-aliasing -I"$REPO/native/include" -I"$REPO/native/src")

build() {
    mkdir -p "$WORK/obj" "$WORK/bin"
    local objs=() src obj
    for src in "$REPO"/native/src/*.c; do
        obj="$WORK/obj/$(basename "${src%.c}").o"
        # the *_avx2.c / *_avx512.c files set their ISA with LT_TARGET_BEGIN (lt_internal.h), which
        # clang understands too: every file builds with the same flags
        if [[ ! -e "$obj" || "$src" -nt "$obj" ]] \
           || [[ -n "$(find "$REPO/native/include" "$REPO/native/src" -name '*.h' -newer "$obj" -print -quit)" ]]; then
            "$CC" "${CFLAGS[@]}" "${SAN[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
        fi
        objs+=("$obj")
    done
    local t bin main link
    for t in fuzz_reader fuzz_strip fuzz_engine fuzz_merkle fuzz_recfile make_strip_seeds; do
        bin="$WORK/bin/$t" main="$REPO/native/fuzz/$t.c"
        # relink only when something changed (never rewrite a fuzzer another run is using)
        if [[ -e "$bin" && ! "$main" -nt "$bin" && ! "$REPO/native/fuzz/fuzz_common.h" -nt "$bin" ]] \
           && ! find "$WORK/obj" -name '*.o' -newer "$bin" | grep -q .; then
            continue
        fi
        # fuzz targets link libFuzzer's main; the seed tool has its own main
        if [[ $t == fuzz_* ]]; then link=-fsanitize=fuzzer; else link=-fsanitize=fuzzer-no-link; fi
        "$CC" "${CFLAGS[@]}" "${SAN[@]}" "$link" "$main" "${objs[@]}" -o "$bin.tmp"
        mv -f "$bin.tmp" "$bin"
    done
}

workload_seeds() {  # pcaps of samples/workloads/*.toml: the corpus has no RoCEv2 frames
    [[ -d "$WORK/seeds-workloads" ]] && return 0
    mkdir -p "$WORK/seeds-workloads.tmp"
    if PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" python3 - "$WORK/seeds-workloads.tmp" \
        "$REPO"/samples/workloads/*.toml <<'PY' >&2
import sys
from pathlib import Path
from ledgertool.source.workload import load_spec, open_workload, write_pcap
for spec in sys.argv[2:]:
    write_pcap(open_workload(load_spec(spec)), Path(sys.argv[1]) / (Path(spec).stem + ".pcap"))
PY
    then
        mv "$WORK/seeds-workloads.tmp" "$WORK/seeds-workloads"
    else
        echo "fuzz.sh: no workload seeds (ledgertool not importable); fuzzing without RoCEv2 seeds" >&2
        rm -rf "$WORK/seeds-workloads.tmp"
    fi
}

seed_dirs() {  # capture seeds for reader/engine; frame seeds for strip
    local t=$1 caps=()
    workload_seeds
    [[ -d "$WORK/seeds-workloads" ]] && caps+=("$WORK/seeds-workloads")
    if [[ -d "$CORPUS/files" ]]; then
        caps+=("$CORPUS/files")
        [[ -d "$CORPUS/derived" ]] && caps+=("$CORPUS/derived")
    else
        echo "fuzz.sh: corpus not found at $CORPUS (set LEDGERTOOL_CORPUS); fewer seeds" >&2
    fi
    if [[ $t == strip ]]; then
        if [[ ! -d "$WORK/seeds-strip" ]]; then
            mkdir -p "$WORK/seeds-strip.tmp"
            local d files=()
            for d in "${caps[@]}"; do files+=("$d"/*); done
            "$WORK/bin/make_strip_seeds" "$WORK/seeds-strip.tmp" 40 "${files[@]}" >&2
            mv "$WORK/seeds-strip.tmp" "$WORK/seeds-strip"
        fi
        echo "$WORK/seeds-strip"
    else
        printf '%s\n' "${caps[@]}"
    fi
}

run() {
    local t=$1 max_len dict
    case $t in
        reader) max_len=1048576 dict=captures.dict ;;
        strip) max_len=65540 dict=packets.dict ;;
        engine) max_len=65536 dict=engine.dict ;;
        merkle) max_len=262144 dict= ;;
        recfile) max_len=262144 dict= ;;
        python) max_len=65536 dict= ;;
        *) echo "fuzz.sh: unknown target $t" >&2; exit 2 ;;
    esac
    if [[ $t == engine && ! -e "$WORK/engine.dict" ]]; then  # both dictionaries
        cat "$REPO/native/fuzz/captures.dict" "$REPO/native/fuzz/packets.dict" > "$WORK/engine.dict"
    fi
    local dict_flag=()
    [[ -n $dict ]] && dict_flag=(-dict="$REPO/native/fuzz/$dict")
    [[ $t == engine ]] && dict_flag=(-dict="$WORK/engine.dict")
    mkdir -p "$WORK/corpus-$t" "$WORK/crashes-$t"
    local seeds=() cmd=("$WORK/bin/fuzz_$t")
    case $t in
        merkle | recfile) ;;  # no seeds: the input is sizes and raw records
        python) cmd=(python3 "$REPO/scripts/fuzz_parsers.py") ;;
        *) mapfile -t seeds < <(seed_dirs "$t") ;;
    esac
    echo "== fuzz_$t for ${SECONDS_PER}s (seeds: ${seeds[*]:-none}; crashers: $WORK/crashes-$t/)"
    local rc=0
    # corpus-TARGET first: libFuzzer writes new inputs to the first directory only.
    PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" \
    "${cmd[@]}" "$WORK/corpus-$t" "${seeds[@]}" -max_total_time="$SECONDS_PER" -max_len="$max_len" \
        "${dict_flag[@]}" -timeout=25 -rss_limit_mb=4096 -artifact_prefix="$WORK/crashes-$t/" -print_final_stats=1 \
        ${JOBS:+$( ((JOBS > 1)) && echo "-jobs=$JOBS -workers=$JOBS")} "${EXTRA[@]}" \
        > "$WORK/log-$t.txt" 2>&1 || rc=$?
    tail -n 25 "$WORK/log-$t.txt"
    if ((rc != 0)); then
        echo "fuzz.sh: fuzz_$t exited $rc; crashers in $WORK/crashes-$t/ (log: $WORK/log-$t.txt)" >&2
    fi
    return $rc
}

build
case $TARGET in
    build) echo "built: $WORK/bin/" ;;
    all) st=0; for t in reader strip engine merkle recfile python; do run "$t" || st=1; done; exit $st ;;
    *) run "$TARGET" ;;
esac
