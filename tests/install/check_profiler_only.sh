#!/usr/bin/env bash
# The profiler-only build of profiler/README.md: configures with TIERGYM_PROFILER_ONLY and
# with ZeroMQ, msgpack, Eigen, GoogleTest and Google Benchmark hidden from find_package, then
# builds the profiler's programs and libraries and runs `tiergym-prof --help`.
#   check_profiler_only.sh CMAKE SOURCE_DIR BINARY_DIR BUILD_TYPE WERROR
# The build goes beside BINARY_DIR (same depth, same compiler, type and flags), so that
# ccache, given a base directory above both, serves the objects the main build compiled: a
# minute of compiling becomes seconds. Without ccache it compiles them again.
set -euo pipefail
cmake=$1 src=$2 bin=$3 build_type=$4 werror=$5
tmp="${bin%/}-profiler-only.$$"
trap 'rm -rf "$tmp"' EXIT
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # The deepest directory above both the sources and the build trees.
  base=$src
  while [ "$base" != / ] && { [ "${bin#"$base"/}" = "$bin" ] || [ "${src#"$base"}" = "$src" ]; }; do
    base=$(dirname "$base")
  done
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$base}"
fi
"$cmake" -S "$src" -B "$tmp" -DCMAKE_BUILD_TYPE="$build_type" -DTIERGYM_WERROR="$werror" \
  -DTIERGYM_PROFILER_ONLY=ON -DTIERGYM_BUILD_TESTS=OFF -DTIERGYM_BUILD_BENCHMARKS=OFF \
  "${launcher[@]}" \
  -DCMAKE_DISABLE_FIND_PACKAGE_cppzmq=ON -DCMAKE_DISABLE_FIND_PACKAGE_msgpack=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON >/dev/null
"$cmake" --build "$tmp" -j2 --target tiergym-prof phasemark tiergym_swsample \
  tiergym-testapp >/dev/null
"$tmp/bin/tiergym-prof" --help | head -n 3
