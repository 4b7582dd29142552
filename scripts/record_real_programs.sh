#!/usr/bin/env bash
# Records real, unmodified Debian programs and projects each recording onto the bundled
# machines (issue 28): profiles anyone can rerun on a machine without a PMU.
#
#   scripts/record_real_programs.sh [OUT [PROGRAM...]]   # default OUT: build/real-profiles
#
# Writes OUT/<program>/recording/ddr.csv (the timer backend's recording, phasemarked at
# the program's timestep function) and OUT/<program>-<machine>/profile/<tier>.csv for
# each bundled machine (knl, disagg, xeonmax). Needs the C++ build (build/bin/tiergym-prof,
# build/bin/tiergym), root or kernel.perf_event_paranoid <= 0 (uprobes), and the Debian
# package of each program recorded. Programs (default: all):
#   lammps-melt   3-D Lennard-Jones melt (examples/melt, box 16^3, 100 steps)
#   lammps-crack  2-D crack propagation (examples/crack, 400 steps)
#                 both phasemarked at LAMMPS_NS::PairLJCut::compute (one phase per force
#                 computation); packages lammps (scripts/install_deps.sh), lammps-examples
#   hpcc          HPC Challenge 1.5 on one MPI process (HPL N=2000: STREAM on 1.33 M-element
#                 vectors, RandomAccess on a 2^21-word table, DGEMM, PTRANS, FFT), phasemarked
#                 at MPI_Wtime, which HPCC calls around every timed kernel (one phase per
#                 timed region: STREAM's copy, scale, add and triad each ten times, ...);
#                 package hpcc (not in install_deps.sh: no test needs it). About 35 s.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-build/real-profiles}")"
shift || true
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(lammps-melt lammps-crack hpcc)
prof="$PWD/build/bin/tiergym-prof"
tiergym="$PWD/build/bin/tiergym"
lammps_lib=/lib/x86_64-linux-gnu/liblammps.so.0
mpi_lib=/lib/x86_64-linux-gnu/libmpi.so.40
ex=/usr/share/lammps/examples
for f in "$prof" "$tiergym"; do
  [ -x "$f" ] || { echo "record_real_programs: $f missing: ./scripts/build.sh first" >&2; exit 2; }
done
missing() { echo "record_real_programs: $1 is missing (apt-get install $2)" >&2; exit 2; }
for program in "${programs[@]}"; do
  case "$program" in
    lammps-melt|lammps-crack)
      { command -v lmp >/dev/null && [ -e "$lammps_lib" ]; } || missing "Debian's lammps" lammps
      [ -d "$ex" ] || missing lammps-examples lammps-examples ;;
    hpcc)
      { command -v hpcc >/dev/null && [ -e "$mpi_lib" ]; } || missing "Debian's hpcc" hpcc ;;
    *) echo "record_real_programs: unknown program '$program' (lammps-melt, lammps-crack, hpcc)" >&2
       exit 2 ;;
  esac
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
for program in "${programs[@]}"; do
  rm -rf "$out/$program"
  mkdir -p "$out/$program/recording"
  echo "record_real_programs: $program"
  case "$program" in
    lammps-*)
      # examples/melt with the box grown to 16x16x16 and 100 steps; examples/crack with 400.
      if [ "$program" = lammps-melt ]; then
        sed 's/block 0 10 0 10 0 10/block 0 16 0 16 0 16/; s/^run[[:space:]].*/run 100/' \
          "$ex/melt/in.melt" >"$work/in.melt"
      else
        sed 's/^run[[:space:]]*5000/run 400/' "$ex/crack/in.crack" >"$work/in.crack"
      fi
      (cd "$work" && "$prof" record --backend timer --device ddr --app "$program" \
         --phasemark-at "$lammps_lib:_ZN9LAMMPS_NS9PairLJCut7computeEii" \
         -o "$out/$program/recording/ddr.csv" \
         -- lmp -in "$work/in.${program#lammps-}" -log none -screen none) ;;
    hpcc)
      # The package's example input on one process (P = Q = 1) with HPL's N = 2000, which
      # sizes STREAM's vectors and RandomAccess's table too. hpcc reads hpccinf.txt and
      # writes hpccoutf.txt in its working directory.
      mkdir -p "$work/hpcc"
      sed 's/^1000 *Ns/2000         Ns/; s/^2 *Ps/1            Ps/; s/^2 *Qs/1            Qs/' \
        /usr/share/doc/hpcc/examples/_hpccinf.txt >"$work/hpcc/hpccinf.txt"
      (cd "$work/hpcc" && "$prof" record --backend timer --device ddr --app hpcc \
         --phasemark-at "$mpi_lib:MPI_Wtime" -o "$out/hpcc/recording/ddr.csv" -- hpcc)
      grep -q "End of HPC Challenge" "$work/hpcc/hpccoutf.txt" ||
        { echo "record_real_programs: hpcc did not finish (its output: $work/hpcc/hpccoutf.txt)" >&2
          trap - EXIT; exit 1; } ;;
  esac
  for machine in knl disagg xeonmax; do
    rm -rf "$out/$program-$machine"
    "$tiergym" trace project --machine "$machine" "$out/$program/recording/ddr.csv" \
      "$out/$program-$machine/profile"
  done
done
echo "record_real_programs: profiles in $out (tiergym trace info $out/${programs[0]}-knl/profile)"
