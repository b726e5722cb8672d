#!/usr/bin/env bash
# The ABI may only grow compatibly. abidiff (Debian abigail-tools) compares
# the committed 1.0 baseline dump with the ABI surface built from today's
# header; a change it calls incompatible (exit bit 8), or any abidiff error,
# fails. Fields appended at the end of a struct are what the ABI's versioning
# allows (append_only.abignore). The baseline must also still describe the
# frozen 1.0 header exactly.
#   abi_stability.sh BASELINE.xml SURFACE_CURRENT.so SURFACE_FROZEN_V1_0.so
set -uo pipefail
baseline=$1 current=$2 frozen=$3
command -v abidiff >/dev/null || { echo "SKIP: abidiff not installed (apt-get install abigail-tools)"; exit 77; }

abidiff "$baseline" "$frozen" > /tmp/ddph-abidiff-frozen.$$ 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  cat /tmp/ddph-abidiff-frozen.$$; rm -f /tmp/ddph-abidiff-frozen.$$
  echo "FAIL: the baseline no longer matches the frozen 1.0 header (abidiff exit $rc)"
  exit 1
fi
rm -f /tmp/ddph-abidiff-frozen.$$

abidiff --suppressions "$(dirname "$0")/append_only.abignore" "$baseline" "$current"
rc=$?
if (( rc & 3 )); then echo "FAIL: abidiff could not compare (exit $rc)"; exit 1; fi
if (( rc & 8 )); then echo "FAIL: an incompatible ABI change against 1.0 (exit $rc)"; exit 1; fi
# With appended fields suppressed, any change left is one the versioning
# rules do not allow (a field inserted in the middle reads as a mere change).
if (( rc & 4 )); then echo "FAIL: an ABI change other than appended fields (exit $rc)"; exit 1; fi
echo "OK: 1.0's ABI, plus only fields appended at the end of structs"
exit 0
