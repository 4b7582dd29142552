#!/usr/bin/env bash
# No library of the build defines libc's functions, and the in-process Python extension
# links no ZeroMQ (issue 27): the ZMTP guard's redefinitions of accept, accept4, recv and
# close (env/server/zmtp_hooks.cc) belong to the `tiergym` executable alone, which must
# have them.
#
#   check_symbols.sh BUILD_DIR    (ctest runs it on the build tree; exit 1 naming what is wrong)
set -euo pipefail
build="${1:?usage: check_symbols.sh BUILD_DIR}"
libc_names='accept|accept4|recv|close'
status=0

# Every static library and shared object of the build: no libc function defined.
mapfile -t libs < <(find "$build/lib" "$build/python" -maxdepth 2 \( -name '*.a' -o -name '*.so' \) 2>/dev/null | sort)
if [ ${#libs[@]} -eq 0 ]; then
  echo "check_symbols: no library under $build/lib" >&2
  exit 1
fi
for lib in "${libs[@]}"; do
  dynamic=()
  case "$lib" in *.so) dynamic=(-D) ;; esac  # a shared object's exports (its static table may be stripped)
  defined=$(nm "${dynamic[@]}" --defined-only "$lib" 2>/dev/null | awk -v re="^($libc_names)\$" '$2 ~ /^[TW]$/ && $3 ~ re {print $3}' | sort -u)
  if [ -n "$defined" ]; then
    echo "FAIL $lib defines libc's $(echo $defined | tr ' ' ','): only the tiergym executable may (env/server/zmtp_hooks.cc)" >&2
    status=1
  fi
done

# The extension, when this build has one: no ZeroMQ, needed or referenced.
for ext in "$build"/python/tiergym/_core*.so; do
  [ -e "$ext" ] || continue
  if readelf -d "$ext" | grep -q 'NEEDED.*libzmq'; then
    echo "FAIL $ext needs libzmq" >&2
    status=1
  fi
  if nm -D --undefined-only "$ext" | grep -q ' zmq_'; then
    echo "FAIL $ext references ZeroMQ's functions" >&2
    status=1
  fi
done

# The executable has the guard.
exe="$build/bin/tiergym"
for name in accept accept4 recv close; do
  if ! nm -D --defined-only "$exe" | awk '{print $3}' | grep -qx "$name"; then
    echo "FAIL $exe does not define $name: the ZMTP guard (zmtp_hooks.cc) is not linked" >&2
    status=1
  fi
done
if [ "$status" -eq 0 ]; then
  echo "check_symbols: ${#libs[@]} libraries define no libc function; the extension links no ZeroMQ; tiergym has the guard"
fi
exit "$status"
