#!/usr/bin/env bash
# Sets up tiergym on this machine, idempotently, from wherever the repository lies:
# the Debian packages (scripts/install_deps.sh), a virtual environment .venv in the
# repository, and the package installed into it in development mode (`pip install -e`,
# which compiles the server binary into build-python/ and puts it inside the package).
#
#   ./scripts/setup.sh            # tiergym and its requirements (numpy, pyzmq, msgpack, gymnasium)
#   ./scripts/setup.sh examples   # also matplotlib, for the plots of agents_examples/evaluate.py
#   ./scripts/setup.sh test       # also the test extras: pytest, SB3, RLlib (Ray), PettingZoo,
#                                 # torch 2.13 (CPU), mpi4py, matplotlib; the package is built
#                                 # with warnings as errors, as the test build is
#
# Then: source .venv/bin/activate. PYTHON=python3.12 ./scripts/setup.sh picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=""
for arg in "$@"; do
  case "$arg" in
    test) extras="[test]" ;;
    examples) extras="[examples]" ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "setup: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

./scripts/install_deps.sh

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating the virtual environment .venv ($("$python" --version 2>&1))"
  "$python" -m venv .venv
fi

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
# For the test command, the package is compiled with warnings as errors, like the test
# build that follows (scripts/test.sh): identical flags, so that build takes the library
# objects from the compiler cache instead of compiling them a second time.
if [ "$extras" = "[test]" ]; then
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DTIERGYM_WERROR=ON"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

start=$(date +%s)
echo "setup: pip install -e .$extras (pip's cache is reused; the first time downloads the packages)"
set +e
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras" 2>&1 |
  grep -v "is ignored: it is neither a file nor a directory"  # noise of some pip configurations
status=("${PIPESTATUS[@]}")
set -e
if [ "${status[0]}" -ne 0 ]; then
  echo "setup: pip install -e .$extras failed (its messages are above)" >&2
  exit 1
fi
echo "setup: .venv ready in $(( $(date +%s) - start )) s ($(.venv/bin/tiergym --version))"
