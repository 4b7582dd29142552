#!/usr/bin/env bash
# Compares two builds of one Google Benchmark program in the same run: runs BASE and NEW in
# turn (A B A B ..., ROUNDS rounds, so that both see the same load) and prints, per
# benchmark, the median real time of each and the ratio NEW / BASE (> 1: NEW is slower),
# with the range of the per-round ratios as the noise to judge it by, and the same ratio
# of CPU times (the steadier figure on a loaded machine, where real time includes waiting
# for a core).
#
#   scripts/compare_bench.sh [--rounds N] [--metric 'REGEX'] BASE_BIN NEW_BIN [options...]
#
# e.g. (main's build in ../base/build, this tree's in build/):
#   scripts/compare_bench.sh --rounds 5 --metric 'built in ([0-9.]+) s' \
#       ../base/build/bin/tiergym-bench-estimator build/bin/tiergym-bench-estimator
# --metric: also compare the number REGEX's group captures in each run's printed output
# (e.g. a summary line; lower is better, like the times). Options after the two programs
# go to both (--benchmark_filter=..., the program's own). Each run's output is kept in a
# temporary directory, removed at the end.
set -euo pipefail
rounds=3
metrics=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --metric) metrics+=("$2"); shift 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ] || [ "${1:-}" = "--help" ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 2
fi
base=$1
new=$2
shift 2
for bin in "$base" "$new"; do
  [ -x "$bin" ] || { echo "compare_bench: $bin is not an executable" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for side in base new; do
    bin=$base
    [ "$side" = new ] && bin=$new
    echo "compare_bench: round $r/$rounds, $side ($bin)" >&2
    "$bin" "$@" --benchmark_out="$out/$side-$r.json" --benchmark_out_format=json \
      >"$out/$side-$r.log" 2>&1 || { echo "compare_bench: $bin failed:" >&2; tail "$out/$side-$r.log" >&2; exit 1; }
  done
done
python3 - "$out" "$rounds" "$base" "$new" "${metrics[@]}" <<'EOF'
import json, re, statistics, sys
out, rounds, base, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
metrics = sys.argv[5:]
def times(side, r):
    with open(f"{out}/{side}-{r}.json") as f:
        doc = json.load(f)
    t, cpu = {}, {}
    with open(f"{out}/{side}-{r}.log") as f:
        log = f.read()
    for m in metrics:
        found = re.search(m, log)
        if found:
            t[m] = float(found.group(1))
    for b in doc["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        t[b["name"]] = b["real_time"] * scale
        cpu[b["name"]] = b["cpu_time"] * scale
    return t, cpu
both = {side: [times(side, r) for r in range(1, rounds + 1)] for side in ("base", "new")}
runs = {side: [t for t, _ in v] for side, v in both.items()}
cpus = {side: [c for _, c in v] for side, v in both.items()}
names = [n for n in runs["base"][0] if all(n in t for s in runs.values() for t in s)]
names = [n for n in names if n not in metrics] + [m for m in metrics if m in names]
print(f"same-run comparison, {rounds} interleaved rounds (base, new, base, new, ...)")
print(f"  base: {base}\n  new:  {new}")
print(f"{'benchmark':<34} {'base (median)':>14} {'new (median)':>14} {'new/base':>9}"
      f"  {'per-round range':<15} {'cpu new/base':>12}  per-round range")
def fmt(s, name=""):
    if name in metrics:
        return f"{s:.4g}"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= f:
            return f"{s / f:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"
for n in names:
    b = [t[n] for t in runs["base"]]
    w = [t[n] for t in runs["new"]]
    per_round = [x / y for x, y in zip(w, b)]
    ratio = statistics.median(w) / statistics.median(b)
    line = (f"{n[:34]:<34} {fmt(statistics.median(b), n):>14} {fmt(statistics.median(w), n):>14} "
            f"{ratio:>9.3f}  {min(per_round):.3f} .. {max(per_round):.3f}")
    if n not in metrics:
        cb = [c[n] for c in cpus["base"]]
        cw = [c[n] for c in cpus["new"]]
        cpu_round = [x / y for x, y in zip(cw, cb)]
        line += (f"  {statistics.median(cw) / statistics.median(cb):>12.3f}"
                 f"  {min(cpu_round):.3f} .. {max(cpu_round):.3f}")
    print(line)
EOF
