#!/usr/bin/env bash
# Sets up (dependencies, build) and runs every test: the C++ suites through CTest and the
# Python suites under /usr/bin/python3 (Debian's interpreter, which has numpy/zmq/msgpack).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
echo "== C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
shopt -s nullglob
py_tests=(tests/python/test_*.py)
if [ ${#py_tests[@]} -gt 0 ]; then
  echo "== Python tests (pytest)"
  TIERGYM_BIN_DIR="$PWD/build/bin" /usr/bin/python3 -m pytest -q tests/python
fi
echo "== Soak (tests/soak/soak.py: hostile and killed clients against one server)"
/usr/bin/python3 tests/soak/soak.py --seconds "${TIERGYM_SOAK_SECONDS:-45}" --binary build/bin/tiergym
echo "== Fuzz (scripts/fuzz.sh: libFuzzer with ASan, UBSan and LeakSanitizer)"
./scripts/fuzz.sh
