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
#
# The terminal gets one line per step with its time; what the package managers (apt, uv,
# pip) and the compiler print goes to the log build/setup.log (TIERGYM_SETUP_LOG=FILE
# elsewhere), written anew each run. When a step fails, the log's last lines are shown
# with the path of the whole log.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=""
for arg in "$@"; do
  case "$arg" in
    test) extras="[test]" ;;
    examples) extras="[examples]" ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "setup: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

log="${TIERGYM_SETUP_LOG:-build/setup.log}"
mkdir -p "$(dirname "$log")"
log="$(cd "$(dirname "$log")" && pwd)/$(basename "$log")"
: >"$log"
export TIERGYM_SETUP_LOG="$log"  # install_deps.sh writes apt's output there

# step LABEL COMMAND...: runs COMMAND with its output in the log; prints "setup: LABEL ..."
# and, when it ends, its time (and what COMMAND printed last on its file descriptor 3,
# when anything: a short result such as "all 26 present"). On failure: the log's tail,
# its path, and the exit.
step() {
  local label="$1" t0 t1 status=0 note first
  shift
  printf 'setup: %s ... ' "$label"
  echo "=== setup: $label ($(date '+%F %T'))" >>"$log"
  first=$(( $(wc -l <"$log") + 1 ))  # the step's first line in the log
  t0=$(date +%s)
  note="$(mktemp)"
  "$@" >>"$log" 2>&1 3>"$note" || status=$?
  t1=$(date +%s)
  if [ "$status" -ne 0 ]; then
    echo "FAILED after $((t1 - t0)) s"
    if [ "$(wc -l <"$log")" -ge "$first" ]; then
      echo "setup: the last 30 lines it wrote to the log:" >&2
      tail -n +"$first" "$log" | tail -n 30 | sed 's/^/  | /' >&2
    else
      echo "setup: it wrote nothing to the log" >&2
    fi
    echo "setup: the whole log: $log" >&2
    rm -f "$note"
    exit 1
  fi
  if [ -s "$note" ]; then
    echo "$(tail -n 1 "$note") ($((t1 - t0)) s)"
  else
    echo "done ($((t1 - t0)) s)"
  fi
  rm -f "$note"
}

step "Debian packages (scripts/install_deps.sh)" ./scripts/install_deps.sh

python="${PYTHON:-python3}"
make_venv() {
  if [ -x .venv/bin/python ]; then
    echo "present ($(.venv/bin/python --version 2>&1))" >&3
  else
    "$python" -m venv .venv || return 1
    echo "created ($(.venv/bin/python --version 2>&1))" >&3
  fi
}
step "virtual environment .venv" make_venv

# For the test command, the package is compiled with warnings as errors, like the test
# build that follows (scripts/test.sh): identical flags, so that build takes the library
# objects from the compiler cache instead of compiling them a second time.
if [ "$extras" = "[test]" ]; then
  export TIERGYM_WERROR=ON
fi
source scripts/compiler_env.sh
# A build-python/ configured by a bare `pip install .` (scikit-build-core's default
# generator, Ninja) cannot be reconfigured with another generator: CMake refuses. Its cache
# is started over; the compiler cache keeps the rebuild short.
if [ -f build-python/CMakeCache.txt ] &&
  ! grep -qx "CMAKE_GENERATOR:INTERNAL=$CMAKE_GENERATOR" build-python/CMakeCache.txt; then
  echo "setup: build-python/ was configured with another CMake generator; starting its cache over"
  rm -rf build-python/CMakeCache.txt build-python/CMakeFiles
fi

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
    .venv/bin/python -m pip install -q --disable-pip-version-check "uv==0.13.9" || return 1
  (
    eval "$(uv_env_from_pip_config)"
    export UV_INDEX_STRATEGY=unsafe-best-match
    .venv/bin/uv pip install --python .venv/bin/python "${build_requires[@]}" &&
      .venv/bin/uv pip install --python .venv/bin/python --no-build-isolation -e ".$extras"
  )
}

install_with_pip() {
  .venv/bin/python -m pip install -q --disable-pip-version-check "${build_requires[@]}" &&
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation \
      -e ".$extras"
}

install() {
  if install_with_uv; then
    echo "installed with uv" >&3
    return 0
  fi
  echo "setup: uv could not be had or failed (its messages are above); pip installs instead"
  install_with_pip || return 1
  echo "installed with pip (uv failed: see the log)" >&3
}
step "tiergym$extras into .venv (the first time downloads the packages and compiles)" install
echo "setup: .venv ready in $(( $(date +%s) - start )) s ($(.venv/bin/tiergym --version)); log: $log"
