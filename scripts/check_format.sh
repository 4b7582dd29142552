#!/usr/bin/env bash
# Fails when clang-format (.clang-format, Google style) would change a C or C++ file of the
# project; prints the files and the command that fixes them.
#   ./scripts/check_format.sh          check every tracked source
#   ./scripts/check_format.sh --fix    reformat them in place
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.c' ':!kernel_patches/**')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: clang-format would change ${#bad[@]} file(s):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix with: ./scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
