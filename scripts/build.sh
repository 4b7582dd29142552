#!/usr/bin/env bash
# Installs the Debian dependencies (idempotent) and builds everything (programs, tests,
# benchmarks) into build/ (Release), through ccache when it is there. TIERGYM_WERROR=ON (as
# scripts/test.sh, and so CI, sets it) makes every compiler warning an error.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE="${TIERGYM_BUILD_TYPE:-Release}" "${launcher[@]}" \
  -DTIERGYM_WERROR="${TIERGYM_WERROR:-OFF}" >/dev/null
cmake --build build -j"$(nproc)"
