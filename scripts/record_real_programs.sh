#!/usr/bin/env bash
# Records real, unmodified Debian programs and projects each recording onto the bundled
# machines (issue 28): profiles anyone can rerun on a machine without a PMU.
#
#   scripts/record_real_programs.sh [OUT]     # default OUT: build/real-profiles
#
# Writes OUT/<program>/recording/ddr.csv (the timer backend's recording, phasemarked at
# the program's timestep function) and OUT/<program>-<machine>/profile/<tier>.csv for
# each bundled machine (knl, disagg, xeonmax). Needs Debian's lammps (scripts/install_deps.sh),
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
cat >"$work/in.melt" <<'IN'
units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 16 0 16 0 16
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 3.0 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
neigh_modify every 20 delay 0 check no
fix 1 all nve
run 100
IN
# examples/crack with 400 steps instead of 5000.
sed 's/^run[[:space:]]*5000/run 400/' /usr/share/lammps/examples/crack/in.crack >"$work/in.crack" 2>/dev/null ||
  { echo "record_real_programs: lammps-examples is missing (apt-get install lammps-examples)" >&2; exit 2; }
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
