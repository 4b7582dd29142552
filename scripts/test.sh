#!/usr/bin/env bash
# Sets up (Debian packages, .venv with tiergym and the test extras from PyPI: Gymnasium,
# Stable-Baselines3, RLlib on Ray, PettingZoo, torch 2.13 CPU), builds the C++ tree, and
# runs every test: formatting, function-length and clang-tidy checks, the C++ suites
# through CTest (the layer probes of tests/layers among them), the Python suites with the
# .venv's pytest, a soak of the server, a hostile client's checks and the fuzzers.
# Idempotent; from any clone location.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
./scripts/setup.sh test
echo "== Hygiene: clang-format (scripts/check_format.sh)"
./scripts/check_format.sh
echo "== Hygiene: function length (scripts/check_function_length.py: at most 80 lines in the codec, the service and the environment step)"
python3 scripts/check_function_length.py --max-lines 80 \
  env/protocol env/server env/environment.cc env/cosched env/provider env/vector
t1=$(date +%s)
# Warnings fail the build here (and so in CI).
TIERGYM_WERROR=ON ./scripts/build.sh
t2=$(date +%s)
echo "== C++ tests (ctest)"
# One more test than cores: many tests wait on sockets and child processes.
ctest --test-dir build --output-on-failure -j"$(( $(nproc) + 1 ))" --timeout 600
t3=$(date +%s)
# The fuzzers' sanitizer build (clang) uses the cores the Python tests leave idle, at a
# lower priority; the fuzzers then run, at that priority too, beside the soak and the
# hostile check, which mostly wait on their sockets. Their output is shown at the end (the
# build's only if it fails).
fuzz_dir="$(mktemp -d "${TMPDIR:-/tmp}/tiergym-fuzz-run.XXXXXX")"
set -m  # its own process group, so that an early exit stops the whole build and run
(
  nice -n 10 ./scripts/fuzz.sh --build-only >"$fuzz_dir/build.log" 2>&1 || exit 3
  while [ ! -e "$fuzz_dir/go" ]; do sleep 1; done
  nice -n 10 ./scripts/fuzz.sh >"$fuzz_dir/run.log" 2>&1
) &
fuzz=$!
# clang-tidy too (a finding fails the run, reported after the Python tests).
(nice -n 10 ./scripts/check_tidy.sh build 4 >"$fuzz_dir/tidy.log" 2>&1) &
tidy=$!
set +m
trap 'kill -- "-$fuzz" 2>/dev/null || true; kill -- "-$tidy" 2>/dev/null || true; rm -rf "$fuzz_dir"' EXIT
echo "== Python tests (pytest, .venv; clang-tidy and the fuzzers' build beside them)"
# The package's own binary (installed in .venv by setup.sh) serves the Python tests. They
# run on every core (pytest-xdist), a module's tests in one worker (they share its
# servers); RLlib's module, the longest, is handed out first. The few that look at the
# whole machine (marked alone: /dev/shm) run afterwards, by themselves.
pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider)
"${pytest[@]}" -n "$(nproc)" --dist loadfile --durations=12 -m "not alone" \
  tests/python/test_rllib.py tests/python
"${pytest[@]}" -m alone tests/python
t4=$(date +%s)
echo "== Hygiene: clang-tidy on the most recently changed sources (scripts/check_tidy.sh)"
tidy_status=0
wait "$tidy" || tidy_status=$?
cat "$fuzz_dir/tidy.log"
[ "$tidy_status" = 0 ] || exit 1
touch "$fuzz_dir/go"
echo "== Soak (tests/soak/soak.py: hostile and killed clients against one server, then again over CURVE; the fuzzers run beside it)"
soak_s="${TIERGYM_SOAK_SECONDS:-45}"
.venv/bin/python tests/soak/soak.py --seconds "$(( soak_s * 2 / 3 ))" --binary build/bin/tiergym
.venv/bin/python tests/soak/soak.py --seconds "$(( soak_s / 3 ))" --binary build/bin/tiergym --curve
echo "== Hostile client (tests/soak/hostile_check.py: the security model's claims one by one, then over CURVE)"
.venv/bin/python tests/soak/hostile_check.py --binary build/bin/tiergym
.venv/bin/python tests/soak/hostile_check.py --binary build/bin/tiergym --curve --messages 3000
echo "== Fuzz (scripts/fuzz.sh: libFuzzer with ASan, UBSan and LeakSanitizer)"
fuzz_status=0
wait "$fuzz" || fuzz_status=$?
if [ "$fuzz_status" = 3 ]; then
  echo "test.sh: the fuzzers' build failed:" >&2
  cat "$fuzz_dir/build.log" >&2
  exit 1
fi
cat "$fuzz_dir/run.log"
[ "$fuzz_status" = 0 ] || exit 1
trap - EXIT
rm -rf "$fuzz_dir"
t5=$(date +%s)
echo "test.sh: setup $((t1 - t0)) s, C++ build $((t2 - t1)) s, ctest $((t3 - t2)) s, pytest (and clang-tidy) $((t4 - t3)) s, soak and fuzz $((t5 - t4)) s; total $((t5 - t0)) s"
