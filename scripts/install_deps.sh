#!/usr/bin/env bash
# Installs every Debian package tiergym needs to build, test and run: the compilers, CMake
# and the C++ libraries, Python with venv (the Python packages come from PyPI into a virtual
# environment, see scripts/setup.sh), matplotlib for the plots `tiergym validate --plot`
# draws with /usr/bin/python3, and Open MPI for the MPI rollouts.
# Idempotent: packages already present are skipped without touching the network.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ccache procps
  cppzmq-dev libzmq3-dev libmsgpack-cxx-dev libeigen3-dev libnuma-dev libpfm4-dev
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
  python3 python3-venv python3-numpy python3-matplotlib
  openmpi-bin
  clang libclang-rt-14-dev  # the fuzz targets (scripts/fuzz.sh): libFuzzer and sanitizers
  clang-format clang-tidy   # scripts/check_format.sh, scripts/check_tidy.sh
  libzydis-dev              # the profiler's timer backend: x86-64 decoding of sampled instructions
  lammps                    # tests/python/test_real_program.py: a real program recorded end to end
)

for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "install_deps: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# A one-line result also on file descriptor 3 when it is open (scripts/setup.sh shows it
# beside the step's time; the rest goes to its log).
result() {
  echo "install_deps: $1"
  if { true >&3; } 2>/dev/null; then echo "$1" >&3; fi
}

if [ ${#missing[@]} -eq 0 ]; then
  result "all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
result "installed ${#missing[@]} of ${#PACKAGES[@]} packages: ${missing[*]}"
