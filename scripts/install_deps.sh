#!/usr/bin/env bash
# Installs every Debian package tiergym needs to build, test and run.
# Idempotent: packages already present are skipped without touching the network.
#
#   ./scripts/install_deps.sh                 # everything the build and the tests need
#   ./scripts/install_deps.sh --torch         # also python3-torch (large; the PPO example
#   TIERGYM_WITH_TORCH=1 ./scripts/install_deps.sh   # and its tests skip without it)
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  cppzmq-dev libzmq3-dev libmsgpack-cxx-dev libeigen3-dev libnuma-dev libpfm4-dev
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-zmq python3-msgpack python3-pytest python3-matplotlib
  python3-mpi4py openmpi-bin
  clang libclang-rt-14-dev  # the fuzz targets (scripts/fuzz.sh): libFuzzer and sanitizers
)

# torch is opt-in: 162 packages, about 550 MB installed (55 s here), used only by
# agents_examples/ppo_torch.py (which prints a message and exits 0 without it).
with_torch="${TIERGYM_WITH_TORCH:-0}"
for arg in "$@"; do
  case "$arg" in
    --torch) with_torch=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install_deps: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
if [ "$with_torch" = "1" ]; then
  PACKAGES+=(python3-torch)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
