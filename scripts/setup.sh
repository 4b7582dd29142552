#!/usr/bin/env bash
# Sets up tiergym on this machine, idempotently, from wherever the repository lies:
# the Debian packages (scripts/install_deps.sh), a virtual environment .venv in the
# repository, and the package installed into it in development mode (`pip install -e`, by
# uv or else pip, which compiles the server binary into build-python/ and puts it inside
# the package).
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
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
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
# pip's index settings (pip.conf, PIP_* variables) for uv, which reads only its own
# (UV_*): the most specific source of each key wins, as in pip.
uv_env_from_pip_config() {
  .venv/bin/python -m pip config list 2>/dev/null | .venv/bin/python -c '
import re, shlex, sys
rank = {"global": 0, "install": 1, ":env:": 2}
best = {}
for line in sys.stdin:
    m = re.match(r"(.*)\.(index-url|extra-index-url|find-links)=(.*)$", line.strip())
    if m and rank.get(m[1], 0) >= best.get(m[2], (-1, ""))[0]:
        best[m[2]] = (rank.get(m[1], 0), m[3].strip("\x27\""))
names = {"index-url": "UV_INDEX_URL", "extra-index-url": "UV_EXTRA_INDEX_URL",
         "find-links": "UV_FIND_LINKS"}
for key, (_, value) in best.items():
    if key == "find-links":
        value = ",".join(value.split())
    print(f"export {names[key]}={shlex.quote(value)}")
'
}

# The package is built in .venv itself, with its build requirements (pyproject.toml's
# [build-system] requires) installed there first, not in an isolated environment of a new
# temporary path each time: nanobind's sources then keep their path under the repository, so
# the compiler cache serves them on the next build and in other clones (an isolated build
# compiled them, and the extension module, from scratch every time), and a second setup
# only re-runs CMake's checks.
build_requires=()
mapfile -t build_requires < <(.venv/bin/python -c '
import ast, re, sys
text = open("pyproject.toml").read()
print(*ast.literal_eval(re.search(r"^requires = (\[.*\])$", text, re.M)[1]), sep="\n")')

# uv (from PyPI), a pip-compatible installer, puts the requirements in place in a tenth of
# pip's time (torch, Ray and the rest: about 14 s against 106 s here); pip does it when uv
# cannot be had or fails. uv, like pip, considers every index for each package
# (unsafe-best-match is pip's rule) and does not byte-compile what it installs.
install_with_uv() {
  [ -x .venv/bin/uv ] ||
    .venv/bin/python -m pip install -q --disable-pip-version-check "uv==0.13.9" >/dev/null 2>&1 ||
    return 1
  (
    eval "$(uv_env_from_pip_config)"
    export UV_INDEX_STRATEGY=unsafe-best-match
    .venv/bin/uv pip install --python .venv/bin/python -q "${build_requires[@]}" &&
      .venv/bin/uv pip install --python .venv/bin/python -q --no-build-isolation -e ".$extras"
  )
}

install_with_pip() {
  .venv/bin/python -m pip install -q --disable-pip-version-check "${build_requires[@]}" &&
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation \
      -e ".$extras"
}

echo "setup: installing tiergym$extras into .venv (uv when it can be had; the first time downloads the packages)"
if ! install_with_uv; then
  echo "setup: uv could not be had or failed (any messages of its are above); pip installs instead"
  set +e
  install_with_pip 2>&1 |
    grep -v "is ignored: it is neither a file nor a directory"  # noise of some pip configurations
  status=("${PIPESTATUS[@]}")
  set -e
  if [ "${status[0]}" -ne 0 ]; then
    echo "setup: pip install -e .$extras failed (its messages are above)" >&2
    exit 1
  fi
fi
echo "setup: .venv ready in $(( $(date +%s) - start )) s ($(.venv/bin/tiergym --version))"
