#!/usr/bin/env bash
# The profiler-only build of profiler/README.md: configures with TIERGYM_PROFILER_ONLY and
# with ZeroMQ, msgpack, Eigen, GoogleTest and Google Benchmark hidden from find_package, then
# builds the profiler's programs and libraries and runs `tiergym-prof --help`.
#   check_profiler_only.sh CMAKE SOURCE_DIR
set -euo pipefail
cmake=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
"$cmake" -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DTIERGYM_PROFILER_ONLY=ON \
  -DTIERGYM_BUILD_TESTS=OFF -DTIERGYM_BUILD_BENCHMARKS=OFF "${launcher[@]}" \
  -DCMAKE_DISABLE_FIND_PACKAGE_cppzmq=ON -DCMAKE_DISABLE_FIND_PACKAGE_msgpack=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON >/dev/null
"$cmake" --build "$tmp/build" -j2 --target tiergym-prof phasemark tiergym_swsample \
  tiergym-testapp >/dev/null
"$tmp/build/bin/tiergym-prof" --help | head -n 3
