# Sourced by scripts/setup.sh and scripts/build_wheel.sh (from the repository's root): how
# pip's builds of the package (scikit-build-core) compile, so that they share the compiler
# cache's entries with each other and with scripts/build.sh. TIERGYM_WERROR=ON adds
# warnings as errors, as the test build has them (identical flags: its library objects
# then come from the cache).

# The compiler cache when there is one; the same generator and build depth as
# scripts/build.sh, so that the two builds of the same sources share its entries.
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Unix Makefiles}"
# CMake's default compilers (scikit-build-core would take Python's, often g++ by another
# name, and ccache hashes the compiler's name).
export CC="${CC:-cc}" CXX="${CXX:-c++}"
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
fi
if [ "${TIERGYM_WERROR:-OFF}" = ON ]; then
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DTIERGYM_WERROR=ON"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
