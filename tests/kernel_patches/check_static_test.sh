#!/usr/bin/env bash
# CTest kernel_patches_abi: runs `kernel_patches/check.sh --static` (the checks that need no
# McKernel tree), then shows that the check fails when the ABI header and its copy in patch
# 0001 drift apart, or when a later patch touches the copy.
#   check_static_test.sh KERNEL_PATCHES_DIR
set -euo pipefail
src="${1:?usage: check_static_test.sh KERNEL_PATCHES_DIR}"

echo "== check.sh --static on the series as committed"
bash "$src/check.sh" --static

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fresh_copy() {
  rm -rf "$work/kp"
  mkdir -p "$work/kp"
  cp -r "$src/abi" "$src/check.sh" "$src"/0*.patch "$work/kp/"
}
expect_failure() {
  local what="$1"
  if bash "$work/kp/check.sh" --static > "$work/out" 2>&1; then
    cat "$work/out"
    echo "FAIL: check.sh --static accepted $what" >&2
    exit 1
  fi
  echo "ok    refused: $what ($(grep -m1 FAIL "$work/out" | sed 's/^check.sh: FAIL: //'))"
}

fresh_copy
echo "/* drift */" >> "$work/kp/abi/tiergym_mckernel.h"
expect_failure "a header changed without regenerating patch 0001"

fresh_copy
sed -i 's/^+#define TIERGYM_PHASEMARK_SYSCALL 650$/+#define TIERGYM_PHASEMARK_SYSCALL 651/' "$work/kp"/0001-*.patch
grep -q '^+#define TIERGYM_PHASEMARK_SYSCALL 651$' "$work/kp"/0001-*.patch
expect_failure "patch 0001 carrying another syscall number than the header"

fresh_copy
last="$(ls "$work/kp"/0*.patch | tail -1)"
printf 'diff --git a/kernel/include/tiergym_mckernel.h b/kernel/include/tiergym_mckernel.h\n--- a/kernel/include/tiergym_mckernel.h\n+++ b/kernel/include/tiergym_mckernel.h\n@@ -1 +1 @@\n-a\n+b\n' >> "$last"
expect_failure "a later patch changing the header copy"

fresh_copy
rm "$work/kp"/0002-*.patch
expect_failure "a gap in the numbering"
echo "kernel_patches_abi: all checks passed"
