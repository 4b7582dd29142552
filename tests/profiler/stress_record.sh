#!/usr/bin/env bash
# Stress run of the software backend's harmlessness (run by hand; not part of the suite):
# records each program of tests/profiler/programs/ RUNS times with
# `tiergym-prof record --backend software` while BUSY busy loops (nice 19) compete for the
# CPUs, and counts every recording that did not end exactly as the program does alone
# (a signal, an EFAULT the program saw or the recorder counted, a non-zero exit, a
# different standard output). The figures go into profiler/README.md ("Measured").
#
#   tests/profiler/stress_record.sh                      # 200 runs of each, 4 busy loops
#   RUNS=50 BUSY=2 tests/profiler/stress_record.sh alloc_churn lifecycle
#   BUILD=build-dbg tests/profiler/stress_record.sh      # another build tree
#
# Exit status 0 when no recording harmed its program, 1 otherwise. Each failed run's
# summary and output are kept in $KEEP (default /tmp/tiergym-stress.<pid>).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${BUILD:-build}"
runs="${RUNS:-200}"
busy="${BUSY:-4}"
keep="${KEEP:-/tmp/tiergym-stress.$$}"
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(mt_writers syscall_buffers alloc_churn lifecycle)
prof="$build/bin/tiergym-prof"
[ -x "$prof" ] || { echo "stress: $prof missing: build it first (./scripts/build.sh)" >&2; exit 2; }

work="$(mktemp -d)"
loops=()
cleanup() {
  for p in "${loops[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq "$busy"); do
  nice -n 19 sh -c 'while :; do :; done' &
  loops+=("$!")
done
mkdir -p "$keep"

echo "stress: $runs recordings of each of ${programs[*]} beside $busy busy loops; load: $(uptime | sed 's/.*load average: //')"
printf '%-16s %6s %8s %8s %8s %8s %8s %10s %10s\n' program runs signals efault exit!=0 output failed alone_ms recorded_ms
status=0
for program in "${programs[@]}"; do
  bin="$build/tests/programs/prof-test-$program"
  [ -x "$bin" ] || { echo "stress: $bin missing" >&2; exit 2; }
  alone_out="$("$bin" 2>/dev/null)"
  t0=$(date +%s%N); "$bin" >/dev/null 2>&1; alone_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  signals=0 efault=0 nonzero=0 differs=0 failed=0 times=()
  for run in $(seq "$runs"); do
    set +e
    out="$("$prof" record --backend software --device ddr -o "$work/t.csv" -- "$bin" 2>"$work/summary")"
    rc=$?
    set -e
    s=0 e=0 d=0
    grep -q "killed by signal" "$work/summary" && s=1
    if grep -q "EFAULT" <<<"$out" || grep -q "failed: Bad address" "$work/summary" ||
       grep -Eq "EFAULT returns: [1-9]" "$work/summary"; then e=1; fi
    [ "$out" = "$alone_out" ] || d=1
    signals=$((signals + s)); efault=$((efault + e)); differs=$((differs + d))
    [ "$rc" -eq 0 ] || nonzero=$((nonzero + 1))
    if [ $s -ne 0 ] || [ $e -ne 0 ] || [ $d -ne 0 ] || [ "$rc" -ne 0 ]; then
      failed=$((failed + 1))
      { echo "exit $rc"; echo "$out"; cat "$work/summary"; } >"$keep/$program.$run.txt"
    fi
    t=$(sed -n 's/^ *runtime \([0-9.]*\) s.*/\1/p' "$work/summary" | head -1)
    [ -n "$t" ] && times+=("$t")
  done
  median_ms=$(printf '%s\n' "${times[@]:-0}" | sort -g | awk '{a[NR]=$1} END {printf "%d", a[int((NR+1)/2)] * 1000}')
  printf '%-16s %6d %8d %8d %8d %8d %8d %10d %10d\n' "$program" "$runs" "$signals" "$efault" \
    "$nonzero" "$differs" "$failed" "$alone_ms" "$median_ms"
  [ "$failed" -eq 0 ] || status=1
done
echo "stress: load after: $(uptime | sed 's/.*load average: //'); failed runs kept in $keep"
exit $status
