#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds tests/install/consumer against it with
# find_package(tiergym), and runs the consumer on a profile the installed `tiergym` makes.
#   check_install.sh CMAKE BUILD_DIR SOURCE_DIR
set -euo pipefail
cmake=$1 build=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in bin/tiergym bin/tiergym-prof lib/libphasemark.so lib/libtiergym_swsample.so \
         include/tiergym/estimator/estimator.h include/tiergym/env/client/client.h \
         lib/cmake/tiergym/tiergymConfig.cmake; do
  [ -e "$tmp/prefix/$f" ] || { echo "not installed: $f" >&2; exit 1; }
done
# No header of a layer's internals, command lines or tests is installed.
if find "$tmp/prefix/include" -path '*internal*' -o -path '*/cli/*' -o -path '*tests*' | grep .; then
  echo "installed a private header" >&2; exit 1
fi
"$tmp/prefix/bin/tiergym" trace synth --app minife --machine knl --seed 1 --out "$tmp/p" --quiet
"$cmake" -S "$src/tests/install/consumer" -B "$tmp/consumer" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
"$cmake" --build "$tmp/consumer" -j2 >/dev/null
"$tmp/consumer/consumer" "$tmp/p/minife/profile" "$tmp/p/minife/runs/placements/hbm50.json"
