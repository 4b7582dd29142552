#!/usr/bin/env bash
# Records real, unmodified Debian programs and projects each recording onto the bundled
# machines (issue 28): profiles anyone can rerun on a machine without a PMU.
#
#   scripts/record_real_programs.sh [--bundle] [OUT [PROGRAM...]]   # default OUT: build/real-profiles
#
# Writes OUT/<program>/recording/ddr.csv (the timer backend's recording, phasemarked at
# the program's timestep function) and OUT/<program>-<machine>/profile/<tier>.csv for
# each bundled machine (knl, disagg, xeonmax). With --bundle, also the recording as the
# repository ships it: a binary trace compressed with xz, traces/real/<program>.tgt.xz
# (what `profiles="real"` and the real-v1 split of tiergym.datasets project on first use;
# traces/real/README.md). Needs the C++ build (build/bin/tiergym-prof,
# build/bin/tiergym), root or kernel.perf_event_paranoid <= 0 (uprobes), and the Debian
# package of each program recorded. Programs (default: all), each sized to a footprint
# above the default task's 512 MiB of fast tier (so that placement matters) and sampled at
# a period that keeps its recording near 50,000 to 100,000 samples (0.4 to 1 MB compressed):
#   lammps-melt   3-D Lennard-Jones melt (examples/melt with the box grown to 80^3 lattice
#                 cells, 2,048,000 atoms, 30 steps; --period 500 us)
#   lammps-crack  2-D crack propagation (examples/crack with the slab grown 20x in both
#                 directions, 3.2 M atoms, 100 steps; --period 500 us)
#                 both phasemarked at LAMMPS_NS::PairLJCut::compute (one phase per force
#                 computation); packages lammps (scripts/install_deps.sh), lammps-examples
#   hpcc          HPC Challenge 1.5 on one MPI process (HPL N=9000, a 618 MiB matrix, which
#                 also sizes STREAM's vectors and RandomAccess's table; DGEMM, PTRANS, FFT),
#                 phasemarked at MPI_Wtime, which HPCC calls around every timed kernel (one
#                 phase per timed region); package hpcc (not in install_deps.sh: no test
#                 needs it); --period 1 ms, then every 5th sample of each thread kept.
# Each runs on one thread (OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1). The recording's
# times are wall-clock; on a busy machine they hold time the program waited for a CPU,
# which `tiergym trace project` removes (traces/PROJECTION.md, "Timer recordings"). The
# recordings shipped in traces/real, how and where they were made: traces/real/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=0
if [ "${1:-}" = --bundle ]; then
  bundle=1
  shift
fi
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
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
for program in "${programs[@]}"; do
  rm -rf "$out/$program"
  mkdir -p "$out/$program/recording"
  echo "record_real_programs: $program"
  case "$program" in
    lammps-*)
      # examples/melt with the box grown to 80x80x80 and 30 steps; examples/crack with its
      # slab, boundary layers and notch grown 20x (2000 x 800 lattice cells) and 100 steps.
      if [ "$program" = lammps-melt ]; then
        sed 's/block 0 10 0 10 0 10/block 0 80 0 80 0 80/; s/^run[[:space:]].*/run 30/' \
          "$ex/melt/in.melt" >"$work/in.melt"
      else
        sed 's/block 0 100 0 40 -0.25/block 0 2000 0 800 -0.25/; s/38\.75/798.75/g;
             s/INF 20 20 INF/INF 400 400 INF/; s/INF 20 INF 20/INF 400 INF 400/;
             s/^run[[:space:]]*5000/run 100/' "$ex/crack/in.crack" >"$work/in.crack"
      fi
      (cd "$work" && "$prof" record --backend timer --period 500000 --device ddr --app "$program" \
         --phasemark-at "$lammps_lib:_ZN9LAMMPS_NS9PairLJCut7computeEii" \
         -o "$out/$program/recording/ddr.csv" \
         -- lmp -in "$work/in.${program#lammps-}" -log none -screen none) ;;
    hpcc)
      # The package's example input on one process (P = Q = 1) with HPL's N = 9000, which
      # sizes STREAM's vectors and RandomAccess's table too. hpcc reads hpccinf.txt and
      # writes hpccoutf.txt in its working directory.
      mkdir -p "$work/hpcc"
      sed 's/^1000 *Ns/9000         Ns/; s/^2 *Ps/1            Ps/; s/^2 *Qs/1            Qs/' \
        /usr/share/doc/hpcc/examples/_hpccinf.txt >"$work/hpcc/hpccinf.txt"
      (cd "$work/hpcc" && "$prof" record --backend timer --period 1000000 --device ddr --app hpcc \
         --phasemark-at "$mpi_lib:MPI_Wtime" -o "$out/hpcc/recording/ddr-every-tick.csv" -- hpcc)
      # Every 5th sample of each thread kept (as a 5 ms period would sample: each sample
      # then stands for 5 ms of CPU time at memory): 476,000 samples are 4.7 MB compressed.
      # A 1 ms period keeps HPCC's short timed regions (STREAM's kernels) sampled at all.
      awk -F, -v n=5 '
        /^# sample_period=/ { p = substr($0, 17); print "# sample_period=" p * n
          print "# thinned=every " n "th sample of each thread of a recording at sample_period=" p
          next }
        /^S,/ { if (seen[$3]++ % n) next }
        { print }' "$out/hpcc/recording/ddr-every-tick.csv" >"$out/hpcc/recording/ddr.csv"
      grep -q "End of HPC Challenge" "$work/hpcc/hpccoutf.txt" ||
        { echo "record_real_programs: hpcc did not finish (its output: $work/hpcc/hpccoutf.txt)" >&2
          trap - EXIT; exit 1; } ;;
  esac
  if [ "$bundle" = 1 ]; then
    # Binary (columns of integers compress well), then xz at its strongest setting.
    "$tiergym" trace convert "$out/$program/recording/ddr.csv" "$work/$program.tgt"
    xz -9e -T1 -c "$work/$program.tgt" >"$work/$program.tgt.xz"
    mv "$work/$program.tgt.xz" "traces/real/$program.tgt.xz"
    echo "record_real_programs: traces/real/$program.tgt.xz ($(stat -c %s "traces/real/$program.tgt.xz") bytes)"
  fi
  for machine in knl disagg xeonmax; do
    rm -rf "$out/$program-$machine"
    "$tiergym" trace project --machine "$machine" "$out/$program/recording/ddr.csv" \
      "$out/$program-$machine/profile"
  done
done
echo "record_real_programs: profiles in $out (tiergym trace info $out/${programs[0]}-knl/profile)"
