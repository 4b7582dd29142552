#!/usr/bin/env bash
# The main job on the bundled applications: sets up (dependencies, build), generates the
# synthetic profiles of the four bundled application models on a KNL-like machine, then
# summarises one profile, estimates a placement, and validates the estimator against the
# measured runs of every application.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
tg=build/bin/tiergym
out=build/profiles
apps=(minife lulesh nekbone lammps)

echo "== Generating the bundled synthetic profiles into $out (deterministic, seed 1)"
for app in "${apps[@]}"; do
  "$tg" trace synth --app "$app" --machine knl --seed 1 --out "$out" --quiet
done

echo
echo "== Profile summary: lulesh"
"$tg" trace info "$out/lulesh/profile" --max-ranges 8 | head -n 30
echo "   (full report: $tg trace info $out/lulesh/profile)"

echo
echo "== Estimate: lulesh with 50 % of its pages in HBM (first touch)"
"$tg" estimate --profile "$out/lulesh/profile" --placement "$out/lulesh/runs/placements/hbm50.json"

echo
echo "== Estimator against the measured runs of each application"
printf '%-10s %s\n' app "result"
for app in "${apps[@]}"; do
  printf '%-10s %s\n' "$app" "$("$tg" validate --profile "$out/$app/profile" --runs "$out/$app/runs/runs.csv" | tail -n 1)"
done

echo
echo "== Contention estimator on the bundled sensitivity data (seed 000, Tables 1-3)"
data=estimator/contention/data
"$tg" contention validate --curves "$data/curves.csv" --apps "$data/apps.csv" --pairs "$data/pairs.csv"
