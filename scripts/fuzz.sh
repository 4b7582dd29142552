#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang, AddressSanitizer,
# UndefinedBehaviorSanitizer and LeakSanitizer into build-fuzz/, and runs each for a bounded
# time from its seed corpus (tests/fuzz/corpus/TARGET/; new inputs go to a temporary
# directory, the repository is not touched). Fails on a crash, a sanitizer error, a leak,
# a timeout (one input over 10 s) or an input passing 2 GB of memory; the input at fault is
# kept and its path printed. The targets run side by side, one per core.
#
#   ./scripts/fuzz.sh                      # every target, 20 s each
#   TIERGYM_FUZZ_SECONDS=300 ./scripts/fuzz.sh protocol
#   ./scripts/fuzz.sh --build-only         # only build them (scripts/test.sh builds them
#                                          # while the Python tests run)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${TIERGYM_FUZZ_SECONDS:-20}"
build_only=0
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(protocol trace_csv trace_binary placement machine)

if ! command -v clang++ >/dev/null ||
   ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  ./scripts/install_deps.sh  # clang and libclang-rt-14-dev
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTIERGYM_BUILD_FUZZERS=ON -DTIERGYM_BUILD_TESTS=OFF -DTIERGYM_BUILD_BENCHMARKS=OFF \
  "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null
[ "$build_only" = 0 ] || exit 0

work="$(mktemp -d "${TMPDIR:-/tmp}/tiergym-fuzz.XXXXXX")"
# One libFuzzer process per core at a time; each target writes its own log and status.
fuzz_one() {
  local t=$1
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
     timeout $((seconds + 120)) "build-fuzz/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/$t/artifacts/" \
       "$work/$t/corpus" "tests/fuzz/corpus/$t" >"$work/$t/log" 2>&1; then
    echo 0 >"$work/$t/status"
  else
    echo 1 >"$work/$t/status"
  fi
}
jobs_max="$(nproc)"
echo "== fuzz ${targets[*]}: ${seconds} s each, ${jobs_max} at a time"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  log="$work/$t/log"
  if [ "$(cat "$work/$t/status" 2>/dev/null)" = 0 ]; then
    echo "fuzz $t: $(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$log" |
      tr -s ' ' | tr '\n' ' ')"
  else
    echo "fuzz $t FAILED; the end of its log ($log):"
    tail -40 "$log"
    ls "$work/$t/artifacts/" 2>/dev/null | sed "s|^|  input: $work/$t/artifacts/|"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (inputs kept under $work)"
  exit 1
fi
rm -rf "$work"
echo "fuzz: ${#targets[@]} targets, ${seconds} s each: no crash, sanitizer error or leak"
