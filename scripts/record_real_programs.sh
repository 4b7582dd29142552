#!/usr/bin/env bash
# Records real, unmodified Debian programs and projects each recording onto the bundled
# machines (issue 28): profiles anyone can rerun on a machine without a PMU.
#
#   scripts/record_real_programs.sh [OUT]     # default OUT: build/real-profiles
#
# Writes OUT/<program>/recording/ddr.csv (the timer backend's recording, phasemarked at
# the program's timestep function) and OUT/<program>-<machine>/profile/<tier>.csv for
# each bundled machine (knl, disagg, xeonmax). Needs Debian's lammps (scripts/install_deps.sh)
# and lammps-examples,
# the C++ build (build/bin/tiergym-prof, build/bin/tiergym), root or
# kernel.perf_event_paranoid <= 0 (uprobes). Programs:
#   lammps-melt   3-D Lennard-Jones melt (examples/melt, box 16^3, 100 steps)
#   lammps-crack  2-D crack propagation (examples/crack, 400 steps)
# each phasemarked at LAMMPS_NS::PairLJCut::compute (one phase per force computation).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-build/real-profiles}")"
prof="$PWD/build/bin/tiergym-prof"
tiergym="$PWD/build/bin/tiergym"
lib=/lib/x86_64-linux-gnu/liblammps.so.0
mark="$lib:_ZN9LAMMPS_NS9PairLJCut7computeEii"
for f in "$prof" "$tiergym"; do
  [ -x "$f" ] || { echo "record_real_programs: $f missing: ./scripts/build.sh first" >&2; exit 2; }
done
command -v lmp >/dev/null && [ -e "$lib" ] ||
  { echo "record_real_programs: Debian's lammps is missing (apt-get install lammps)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# examples/melt with the box grown to 16x16x16 and 100 steps; examples/crack with 400.
ex=/usr/share/lammps/examples
[ -d "$ex" ] || { echo "record_real_programs: lammps-examples is missing (apt-get install lammps-examples)" >&2; exit 2; }
sed 's/block 0 10 0 10 0 10/block 0 16 0 16 0 16/; s/^run[[:space:]].*/run 100/' "$ex/melt/in.melt" >"$work/in.melt"
sed 's/^run[[:space:]]*5000/run 400/' "$ex/crack/in.crack" >"$work/in.crack"
mkdir -p "$out"
for program in lammps-melt lammps-crack; do
  input="$work/in.${program#lammps-}"
  rm -rf "$out/$program"
  mkdir -p "$out/$program/recording"
  echo "record_real_programs: $program"
  (cd "$work" && "$prof" record --backend timer --device ddr --app "$program" \
     --phasemark-at "$mark" -o "$out/$program/recording/ddr.csv" \
     -- lmp -in "$input" -log none -screen none)
  for machine in knl disagg xeonmax; do
    rm -rf "$out/$program-$machine"
    "$tiergym" trace project --machine "$machine" "$out/$program/recording/ddr.csv" \
      "$out/$program-$machine/profile"
  done
done
echo "record_real_programs: profiles in $out (tiergym trace info $out/lammps-melt-knl/profile)"
