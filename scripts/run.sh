#!/usr/bin/env bash
# The main job on the bundled applications: sets up (Debian packages, .venv with the tiergym
# package, scripts/setup.sh), generates the
# synthetic profiles of the four bundled application models on a KNL-like machine, then
# summarises one profile, estimates a placement, and validates the estimator against the
# measured runs of every application and the composed estimate against synthetic co-runs;
# ends with an episode of the example placement policy on
# a private environment server (agents_examples/greedy_policy.py).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh examples
tg=.venv/bin/tiergym   # the package's command: the server binary installed inside it
py=.venv/bin/python
out=build/profiles
apps=(minife lulesh nekbone lammps phasedrift)

echo "== Generating the bundled synthetic profiles into $out (deterministic, seed 1)"
for app in "${apps[@]}"; do
  "$tg" trace synth --app "$app" --machine knl --seed 1 --out "$out" --quiet
done

echo
echo "== Profile summary: lulesh"
"$tg" trace info "$out/lulesh/profile" --max-ranges 8 | sed -n 1,30p
echo "   (full report: $tg trace info $out/lulesh/profile)"

echo
echo "== Estimate: lulesh with 50 % of its pages in HBM (first touch)"
"$tg" estimate --profile "$out/lulesh/profile" --placement "$out/lulesh/runs/placements/hbm50.json" \
  --machine knl --model concurrent | sed -n 1,8p

# "N runs, M model: mean error X %, max error Y %" -> "X % / Y %"
errors() { sed -n "s/.*$1 model: mean error \(.*\) %, max error \(.*\) %/\1 % \/ \2 %/p"; }

echo
echo "== Estimator against the measured runs (mean / max error)"
printf '%-11s %5s  %-19s %-19s %-19s %-19s %s\n' app runs "roofline (default)" "paper" "concurrent" \
  "paper, no phasemarks" "interval coverage"
for app in "${apps[@]}"; do
  args=(--profile "$out/$app/profile" --runs "$out/$app/runs/runs.csv" --machine knl)
  with=$("$tg" validate "${args[@]}")
  without=$("$tg" validate "${args[@]}" --no-phasemarks)
  runs=$(grep -m1 'runs, paper model' <<<"$with" | cut -d' ' -f1)
  coverage=$(sed -n 's/.*in \([0-9]* of [0-9]*\) runs.*/\1/p' <<<"$with")
  printf '%-11s %5s  %-19s %-19s %-19s %-19s %s\n' "$app" "$runs" "$(errors roofline <<<"$with")" \
    "$(errors paper <<<"$with")" "$(errors concurrent <<<"$with")" \
    "$(errors paper <<<"$without")" "$coverage"
done

echo
echo "== Phasemarks matter where runs drift apart (phasedrift, range placements)"
args=(--profile "$out/phasedrift/profile" --runs "$out/phasedrift/runs/runs.csv")
paste -d" " <("$tg" validate "${args[@]}" | grep '^range' | awk '{printf "%-22s %8s  %7s\n", $1, $2" "$3, $6}') \
      <("$tg" validate "${args[@]}" --no-phasemarks | grep '^range' | awk '{print $6}') |
  awk 'BEGIN {printf "%-22s %10s  %-9s %s\n", "run", "measured", "with pm", "without pm"} {print}'

if [[ -e /usr/bin/python3 ]] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  "$tg" validate --profile "$out/lulesh/profile" --runs "$out/lulesh/runs/runs.csv" --machine knl \
    --plot "$out/lulesh-validation.png" >/dev/null
fi

echo
echo "== Contention estimator on the bundled sensitivity data (the contention paper, Tables 1-3)"
data=estimator/contention/data
"$tg" contention validate --curves "$data/curves.csv" --apps "$data/apps.csv" --pairs "$data/pairs.csv"

echo
echo "== Co-runs: the composed estimate against synthetic co-runs (two and four tenants on knl and disagg)"
# The ground truth comes from the machines' time model (traces/SYNTH.md, section 9); the
# estimates from each tenant's profile (knl: the profiles above; disagg: generated here).
for app in minife lulesh nekbone lammps; do
  "$tg" trace synth --app "$app" --machine disagg --seed 1 --out "$out-disagg" --no-runs --quiet >/dev/null
done
for machine in knl disagg; do
  profiles=$out
  [[ $machine == disagg ]] && profiles=$out-disagg
  "$tg" trace corun --machine "$machine" --seed 1 --out "$out/coruns-$machine" --quiet >/dev/null
  plot=()
  if [[ -e /usr/bin/python3 ]] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    plot=(--plot "$out/coruns-$machine.png")
  fi
  "$tg" validate --corun "$out/coruns-$machine/coruns.csv" --profiles "$profiles" --quiet "${plot[@]}" |
    sed -n '/^per scenario/,$p'
done

echo
echo "== The environment: a private 'tiergym serve' on the bundled profiles, one episode of the example greedy policy"
"$py" agents_examples/greedy_policy.py --profile lulesh --steps 50

echo
echo "== Policies on the bundled applications with 512 MiB of HBM (agents_examples/evaluate.py)"
"$py" agents_examples/evaluate.py --tier-capacity-mib hbm:512 --quiet \
  --plot "$out/evaluation-hbm512.png"
