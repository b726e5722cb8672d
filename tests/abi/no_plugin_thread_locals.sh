#!/usr/bin/env bash
# No ddphooks thread_local may live in a plugin (a dlopen'ed libddph_*.so):
# there it is dynamic TLS, which LeakSanitizer's leak check cannot walk once
# the plugin is unloaded (the fuzzers' tracer crashes). core/base/thread_slot.h
# is the per-thread pointer to use instead. TLS that CUDA's static runtime
# brings is not ours and is not counted.
#   no_plugin_thread_locals.sh PLUGIN_DIR
set -euo pipefail
libs=$(find "$1" -name 'libddph_*.so' -type f)
[ -n "$libs" ] || { echo "FAIL: no libddph_*.so under $1"; exit 1; }
bad=0
for lib in $libs; do
  # readelf -sW: Num Value Size Type Bind Vis Ndx Name; UND ones are libstdc++'s.
  ours=$(readelf -sW "$lib" | awk '$4 == "TLS" && $7 != "UND" && $8 !~ /^libcudart_static/ {print $8}')
  if [ -n "$ours" ]; then
    echo "FAIL: $lib defines thread_locals (use core/base/thread_slot.h):"
    echo "$ours" | c++filt | head -20
    bad=1
  fi
done
[ $bad -ne 0 ] || echo "$(echo "$libs" | wc -l) plugins, no thread_local of ours"
exit $bad
