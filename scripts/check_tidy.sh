#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy: bugprone, performance, modernize) on the C++ sources changed
# most recently, as many as fit the CI budget, and fails on any finding.
#   ./scripts/check_tidy.sh [BUILD_DIR] [MAX_FILES]    defaults: build, 8
# The sources (libraries and programs; not tests/, whose string-building idioms the
# performance checks flag) are those of the last commits that touched .cc files, newest
# first (a fresh clone's history decides, so CI and a developer check the same files); BUILD_DIR must hold
# compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS is on).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
max=${2:-8}
mapfile -t files < <(git log --name-only --format= -- '*.cc' ':!kernel_patches/**' ':!tests/**' |
                     awk 'NF && !seen[$0]++' | while read -r f; do
                       [ -f "$f" ] && grep -q "\"file\": \"$PWD/$f\"" "$build/compile_commands.json" &&
                         echo "$f"
                     done | head -n "$max")
if [ ${#files[@]} -eq 0 ]; then
  echo "check_tidy: no changed source in $build/compile_commands.json"
  exit 0
fi
echo "check_tidy: clang-tidy on ${#files[@]} recently changed file(s): ${files[*]}"
# clang-tidy's stderr is mostly "N warnings generated." (suppressed ones); kept aside and
# shown when it fails, since a failure that prints nothing on stdout (a crash, a source that
# does not compile) explains itself only there.
stderr_log="$(mktemp "${TMPDIR:-/tmp}/check_tidy.XXXXXX")"
trap 'rm -f "$stderr_log"' EXIT
if ! printf '%s\n' "${files[@]}" |
    xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet --warnings-as-errors='*' \
      2>"$stderr_log"; then
  echo "check_tidy: clang-tidy failed (findings above, if any); what it wrote on stderr:"
  grep -v ' warnings\? generated\.$' "$stderr_log" || true
  exit 1
fi
echo "check_tidy: no findings"
