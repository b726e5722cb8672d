#!/usr/bin/env bash
# Only ddph_* symbols may leave a ddphooks shared object (nm -D).
#   exported_symbols.sh LIB_DIR
set -euo pipefail
libs=$(find "$1" -name 'libddph*.so*' -type f)
[ -n "$libs" ] || { echo "FAIL: no libddph*.so under $1"; exit 1; }
bad=0
for lib in $libs; do
  count=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^ddph_' || true)
  [ "$count" -gt 0 ] || { echo "FAIL: $lib exports no ddph_ symbol"; bad=1; }
  others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^ddph_' || true)
  if [ -n "$others" ]; then
    echo "FAIL: $lib exports non-ddph symbols:"; echo "$others" | head -20; bad=1
  fi
  echo "$(basename "$lib"): $count ddph_ symbols, nothing else"
done
exit $bad
