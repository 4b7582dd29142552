#!/usr/bin/env bash
# Installs the Debian dependencies (idempotent) and builds tiergym into build/ (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE="${TIERGYM_BUILD_TYPE:-Release}" >/dev/null
cmake --build build -j"$(nproc)"
