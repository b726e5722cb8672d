#!/usr/bin/env bash
# Installs ddphooks into a fresh prefix and uses it the way an outside
# project would: pkg-config, find_package(ddphooks) for a new hook family,
# DDPH_PLUGIN_PATH, and a plain-C host that dlopen()s the installed loader.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d /tmp/ddph-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/ddph/ddph.h lib/libddph.so lib/libddph.so.1 bin/ddph \
         lib/ddphooks/libddph_default.so lib/ddphooks/libddph_debugging.so \
         lib/ddphooks/libddph_comm_gloo.so lib/cmake/ddphooks/ddphooksConfig.cmake \
         lib/pkgconfig/ddphooks.pc; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done

# The CMake package finds DLPack itself (find_dependency) instead of naming
# the build machine's include directory.
targets=$prefix/lib/cmake/ddphooks/ddphooksTargets.cmake
grep -q 'dlpack::dlpack' "$targets" || { echo "FAIL: ddph_abi does not link dlpack::dlpack"; exit 1; }
if grep -q '"/usr/include' "$targets"; then echo "FAIL: $targets names /usr/include"; exit 1; fi
grep -q 'find_dependency(dlpack)' "$prefix/lib/cmake/ddphooks/ddphooksConfig.cmake" ||
  { echo "FAIL: ddphooksConfig.cmake does not find DLPack"; exit 1; }

# pkg-config: a program linked against the installed loader.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cat > "$work/version.c" <<'C'
#include <stdio.h>
#include <ddph/ddph.h>
int main(void) { printf("%s\n", ddph_version()); return 0; }
C
cc -std=c99 "$work/version.c" -o "$work/version" $(pkg-config --cflags --libs ddphooks)
# The version the installed header declares, read from the source header.
abi=$(sed -n 's/^#define DDPH_ABI_MAJOR \([0-9]*\).*/\1/p' "$src/abi/include/ddph/ddph.h").$(sed -n 's/^#define DDPH_ABI_MINOR \([0-9]*\).*/\1/p' "$src/abi/include/ddph/ddph.h")
[ "$(LD_LIBRARY_PATH=$prefix/lib "$work/version")" = "$abi" ] || { echo "FAIL: ddph_version via pkg-config is not $abi"; exit 1; }

# find_package: the out-of-tree family, built against the installed header only.
cmake -S "$src/examples/out_of_tree_plugin" -B "$work/plugin" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/plugin" >/dev/null
[ -f "$work/plugin/libddph_example.so" ] || { echo "FAIL: libddph_example.so not built"; exit 1; }
export DDPH_PLUGIN_PATH=$work/plugin

# --load-plugins: the family comes from DDPH_PLUGIN_PATH, and validate runs a
# plugin's code only when told to.
"$prefix/bin/ddph" validate --load-plugins "$src/examples/out_of_tree_plugin/example.yaml"
# The author's check of the new family: the whole plugin contract, from the
# installed tool, on a .so outside the plugin directory.
"$prefix/bin/ddph" validate-plugin --timeout 30 "$work/plugin/libddph_example.so" \
  || { echo "FAIL: ddph validate-plugin on the example family"; exit 1; }
# Captured first: `grep -q` stops reading at the first match, and under
# pipefail the listing's SIGPIPE would fail the test.
listing=$("$prefix/bin/ddph" plugins)
grep -q "scaled_mean" <<<"$listing" || { echo "FAIL: ddph plugins does not list the new family"; exit 1; }

# Two ranks of the C host, through the installed loader and the new family (scale 2.0).
cc -std=c99 -I"$prefix/include" "$src/examples/c_host/allreduce_host.c" -o "$work/host" -ldl -lm
export DDPH_LIBRARY=$prefix/lib/libddph.so.1
rdv="file://$work/rdv"
pids=()
for r in 0 1; do
  timeout 60 "$work/host" "$src/examples/out_of_tree_plugin/example.yaml" $r 2 "$rdv" 1000 2.0 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status -eq 0 ] || { echo "FAIL: C host over the out-of-tree family"; exit 1; }
echo "install test: ok"
