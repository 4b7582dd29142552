#!/usr/bin/env bash
# Checks the tiergym McKernel patch series (kernel_patches/0*.patch).
#
#   kernel_patches/check.sh MCKERNEL_DIR [IHK_DIR]
#       MCKERNEL_DIR: a git clone of github.com/RIKEN-SysSoft/mckernel whose work tree is the
#       base commit (branch PEBS-squashed, 362c9b293 "PEBS support for KNL"). Verifies the
#       base commit, applies the series in order to a temporary index (`git apply --cached
#       --check`, then `git apply --cached`; neither the work tree nor the real index is
#       touched) and checks that the ABI header the series adds is byte-identical to
#       kernel_patches/abi/tiergym_mckernel.h.
#       IHK_DIR (optional): a git clone of github.com/RIKEN-SysSoft/ihk at its PEBS-squashed
#       branch (38dd5f68). Then, after each patch, every C file the series changes is
#       compiled (gcc -fsyntax-only, McKernel's kernel flags against IHK's headers; mcexec
#       against stand-ins for the generated headers) and compared with the base tree: any
#       diagnostic a patch adds fails the check (no undeclared symbol, no type error).
#   kernel_patches/check.sh --static
#       The checks that need no McKernel tree (run by CTest as kernel_patches_abi): every
#       patch parses, the series is numbered 0001.. without gaps, the ABI header in 0001 is
#       byte-identical to kernel_patches/abi/tiergym_mckernel.h (content and git blob id).
#
# Exit status 0 when every check passes, 1 otherwise, 2 on a usage error.
set -euo pipefail

BASE_COMMIT=362c9b293fa88c0bab2a1b5616b9ead67101360b
work=""
ABI_PATH_IN_MCKERNEL=kernel/include/tiergym_mckernel.h

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
abi_header="$here/abi/tiergym_mckernel.h"
mapfile -t patches < <(find "$here" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' | sort)

fail() { echo "check.sh: FAIL: $*" >&2; exit 1; }
ok() { echo "ok    $*"; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

# The lines a patch adds to a new file, without the leading '+', exactly as git would write
# the file (the patch must create the file in one hunk, as git format-patch does).
extract_new_file() {
  local patch="$1" path="$2"
  awk -v path="$path" '
    /^diff --git / { in_file = ($0 == "diff --git a/" path " b/" path); in_hunk = 0; next }
    in_file && /^@@ / { in_hunk = 1; next }
    in_file && in_hunk && /^\+/ { print substr($0, 2); next }
    in_file && in_hunk && /^\\ No newline/ { no_newline = 1; next }
    in_file && in_hunk && /^-- $/ { exit }
  ' "$patch"
}

static_checks() {
  [[ ${#patches[@]} -gt 0 ]] || fail "no patches in $here"
  local i=1 p n
  for p in "${patches[@]}"; do
    n="$(basename "$p" | cut -c1-4)"
    [[ "$n" == "$(printf '%04d' "$i")" ]] || fail "$(basename "$p"): expected number $(printf '%04d' "$i")"
    git apply --stat "$p" > /dev/null 2>&1 || fail "$(basename "$p") does not parse as a patch"
    grep -q "^Subject: \[PATCH $i/${#patches[@]}\]" "$p" ||
      fail "$(basename "$p"): Subject is not [PATCH $i/${#patches[@]}] (regenerate the series with git format-patch)"
    i=$((i + 1))
  done
  ok "${#patches[@]} patches parse and are numbered in order"

  local first="${patches[0]}" tmp
  grep -q "^+++ b/$ABI_PATH_IN_MCKERNEL\$" "$first" ||
    fail "$(basename "$first") does not add $ABI_PATH_IN_MCKERNEL"
  tmp="$(mktemp)"
  extract_new_file "$first" "$ABI_PATH_IN_MCKERNEL" > "$tmp"
  if ! cmp -s "$tmp" "$abi_header"; then
    diff -u "$abi_header" "$tmp" | head -20 >&2 || true
    rm -f "$tmp"
    fail "the header in $(basename "$first") differs from kernel_patches/abi/tiergym_mckernel.h"
  fi
  rm -f "$tmp"
  # The patch's index line names the blob git would store for the new file.
  local want got
  want="$(git hash-object "$abi_header")"
  got="$(awk -v path="$ABI_PATH_IN_MCKERNEL" '
    /^diff --git / { in_file = ($0 == "diff --git a/" path " b/" path); next }
    in_file && /^index / { split($2, a, "\\.\\."); print a[2]; exit }' "$first")"
  [[ -n "$got" && "$want" == "$got"* ]] ||
    fail "$(basename "$first"): blob id $got of $ABI_PATH_IN_MCKERNEL is not that of the header ($want)"
  ok "$(basename "$first") adds $ABI_PATH_IN_MCKERNEL byte-identical to abi/tiergym_mckernel.h (blob ${want:0:12})"

  # Every later patch leaves the header alone (one copy, one owner).
  for p in "${patches[@]:1}"; do
    ! grep -q "^+++ b/$ABI_PATH_IN_MCKERNEL\$" "$p" ||
      fail "$(basename "$p") changes $ABI_PATH_IN_MCKERNEL; only 0001 may"
  done
  ok "no later patch changes the header"
}

# gcc -fsyntax-only of one McKernel kernel file; prints its diagnostics without line numbers.
compile_kernel_file() {
  local tree="$1" ihk="$2" stubs="$3" file="$4"
  (cd "$tree" && gcc -fsyntax-only -std=gnu89 -nostdinc -isystem "$(gcc -print-file-name=include)" \
    -D__KERNEL__ -DIHK_OS_MANYCORE -DBUILTIN_X86 -mcmodel=large -mno-red-zone -mno-sse -mno-mmx \
    -Wall -Wno-unused-function -Werror=implicit-function-declaration \
    -I kernel/include -I "$stubs" -I lib/include -I arch/x86_64/kernel/include \
    -I "$ihk/cokernel/smp/x86_64/include" -I "$ihk/ikc/include" -I "$ihk/linux/include" \
    "$file" 2>&1 || true) | grep -E 'error|warning' | sed -E 's/:[0-9]+:[0-9]+:/:/' | sort -u || true
}

compile_mcexec() {
  local tree="$1" ihk="$2" stubs="$3"
  (cd "$tree" && gcc -fsyntax-only -Wall -Werror=implicit-function-declaration \
    -I executer/include -I "$stubs" -I executer/user -I executer/user/arch/x86_64 \
    -I "$ihk/linux/include" -I "$ihk/include" -I "$stubs/ihkinc" \
    executer/user/mcexec.c 2>&1 || true) | grep -E 'error|warning' | sed -E 's/:[0-9]+:[0-9]+:/:/' | sort -u || true
}

# Stand-ins for the headers a configured build generates (config.h, the Linux version
# header, IHK's ihklib.h) and for bfd.h, which mcexec does not use.
make_stubs() {
  local stubs="$1" ihk="$2"
  mkdir -p "$stubs/include/generated/uapi/linux" "$stubs/ihkinc/ihk"
  printf '#define BUILDID "tiergym-check"\n#define BINDIR "/usr/bin"\n#define ROOTFSDIR ""\n' > "$stubs/config.h"
  printf '#define MCKERNEL_INCDIR "/usr/include"\n#define MCKERNEL_LIBDIR "/usr/lib"\n' >> "$stubs/config.h"
  printf '#define LINUX_VERSION_CODE 266002\n#define KERNEL_VERSION(a,b,c) (((a) << 16) + ((b) << 8) + (c))\n' \
    > "$stubs/include/generated/uapi/linux/version.h"
  sed 's/@[A-Za-z_]*@/0/g' "$ihk/linux/include/ihk/ihklib.h.in" > "$stubs/ihkinc/ihk/ihklib.h"
  echo '/* stand-in: mcexec uses nothing from bfd.h */' > "$stubs/ihkinc/bfd.h"
}

# Compiles the files the series changes in the tree of the temporary index, after the
# patches applied so far, and fails on any diagnostic the base tree does not have.
compile_checks() {
  local mck="$1" ihk="$2" index="$3" label="$4"
  local stubs="$work/stubs" before="$work/before" after="$work/after"
  if [[ ! -d "$before" ]]; then
    [[ -f "$ihk/cokernel/smp/x86_64/include/march.h" ]] || fail "$ihk is not an IHK tree"
    grep -q MSR_IA32_PEBS_ENABLE "$ihk/cokernel/smp/x86_64/include/march.h" ||
      fail "$ihk lacks the PEBS MSRs: check out IHK's PEBS-squashed branch (38dd5f68)"
    make_stubs "$stubs" "$ihk"
    mkdir -p "$before"
    git -C "$mck" archive "$BASE_COMMIT" | tar -x -C "$before"
    cp "$stubs/config.h" "$before/config.h"
  fi
  rm -rf "$after"
  mkdir -p "$after"
  GIT_INDEX_FILE="$index" git -C "$mck" checkout-index -a --prefix="$after/"
  cp "$stubs/config.h" "$after/config.h"
  local files f new count=0
  files="$(cat "${patches[@]}" | sed -n 's|^+++ b/||p' | grep -E '^(kernel|arch/x86_64)/.*\.c$' | sort -u)"
  for f in $files; do
    [[ -f "$after/$f" ]] || continue  # added by a later patch
    count=$((count + 1))
    new="$(comm -13 <( [[ -f "$before/$f" ]] && compile_kernel_file "$before" "$ihk" "$stubs" "$f") \
                    <(compile_kernel_file "$after" "$ihk" "$stubs" "$f"))"
    [[ -z "$new" ]] || { echo "$new" >&2; fail "after $label: new diagnostics in $f"; }
  done
  new="$(comm -13 <(compile_mcexec "$before" "$ihk" "$stubs") <(compile_mcexec "$after" "$ihk" "$stubs"))"
  [[ -z "$new" ]] || { echo "$new" >&2; fail "after $label: new diagnostics in executer/user/mcexec.c"; }
  ok "compiles after $label: $count kernel files and mcexec.c, no new diagnostics"
}

tree_checks() {
  local mck="$1" ihk="${2:-}"
  git -C "$mck" rev-parse --git-dir > /dev/null 2>&1 || fail "$mck is not a git clone of McKernel"
  git -C "$mck" cat-file -e "$BASE_COMMIT^{commit}" 2> /dev/null ||
    fail "$mck lacks the base commit $BASE_COMMIT (git fetch origin PEBS-squashed)"
  git -C "$mck" diff --quiet "$BASE_COMMIT" -- ||
    fail "the work tree of $mck differs from the base commit $BASE_COMMIT (git checkout ${BASE_COMMIT:0:9}; or the series is applied already)"
  ok "work tree of $mck is the base commit ${BASE_COMMIT:0:9} (PEBS support for KNL)"

  local index p
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  index="$work/index"
  GIT_INDEX_FILE="$index" git -C "$mck" read-tree "$BASE_COMMIT"
  for p in "${patches[@]}"; do
    GIT_INDEX_FILE="$index" git -C "$mck" apply --cached --check "$p" ||
      fail "$(basename "$p") does not apply after the patches before it"
    GIT_INDEX_FILE="$index" git -C "$mck" apply --cached "$p"
    ok "applies: $(basename "$p")"
    if [[ -n "$ihk" ]]; then
      compile_checks "$mck" "$ihk" "$index" "$(basename "$p" | cut -c1-4)"
    fi
  done
  GIT_INDEX_FILE="$index" git -C "$mck" show ":$ABI_PATH_IN_MCKERNEL" | cmp -s - "$abi_header" ||
    fail "$ABI_PATH_IN_MCKERNEL after the series differs from kernel_patches/abi/tiergym_mckernel.h"
  ok "$ABI_PATH_IN_MCKERNEL after the series is byte-identical to abi/tiergym_mckernel.h"
}

case "${1:-}" in
  "" | -h | --help) usage ;;
  --static)
    [[ $# -eq 1 ]] || usage
    static_checks ;;
  *)
    [[ $# -le 2 ]] || usage
    static_checks
    tree_checks "$1" "${2:-}" ;;
esac
echo "check.sh: all checks passed"
