#!/usr/bin/env bash
# The wheel stands alone: built from this build (./build.sh wheel's command),
# installed into a fresh virtual environment (no system site packages; its
# numpy and matplotlib from the wheelhouse ./build.sh test fills, offline),
# then used where the clone and the build cannot be seen: a private mount
# namespace lays an empty tmpfs over both. There, `import ddphooks`, the
# `ddph` console script, a 2-rank NumPy allreduce and `python3 -m
# ddphooks.plot` must work, from the wheel's own files only.
#   wheel_test.sh BUILD_DIR SOURCE_DIR     (exit 77: skipped, with the reason)
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
wheelhouse=${DDPH_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/ddphooks/wheelhouse}
if ! ls "$wheelhouse"/numpy-*.whl "$wheelhouse"/matplotlib-*.whl >/dev/null 2>&1; then
  echo "SKIP: no numpy and matplotlib wheels in $wheelhouse (./build.sh test or ./build.sh wheel downloads them)"
  exit 77
fi
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: unshare -m is not permitted here (root in a private mount namespace hides the clone)"
  exit 77
fi
work=$(mktemp -d /tmp/ddph-wheel-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# pip builds in the source folder: a copy keeps the clone untouched.
cp -r "$src/python" "$work/python-src"
rm -rf "$work/python-src/build" "$work/python-src"/*.egg-info
DDPH_WHEEL_BUILD_DIR=$build /usr/bin/python3 -m pip wheel -q --no-deps --no-build-isolation \
  -w "$work/dist" "$work/python-src" >"$work/pip-wheel.log" 2>&1 || { cat "$work/pip-wheel.log"; fail "pip wheel"; }
wheel=$(ls "$work"/dist/ddphooks-*.whl)
case "$(basename "$wheel")" in
  ddphooks-*-py3-none-linux_"$(uname -m)".whl) ;;
  *) fail "the wheel's tags: $(basename "$wheel"), expected py3-none-linux_$(uname -m)" ;;
esac
for f in ddphooks/lib/libddph.so ddphooks/bin/ddph ddphooks/lib/ddphooks/libddph_default.so \
         ddphooks/lib/ddphooks/libddph_comm_gloo.so; do
  unzip -l "$wheel" "$f" >/dev/null || fail "the wheel lacks $f"
done

/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index --find-links "$wheelhouse" "$wheel[numpy,plot]" \
  >"$work/pip-install.log" 2>&1 || { cat "$work/pip-install.log"; fail "pip install of the wheel"; }

cp "$src/examples/python/numpy_allreduce.py" "$work/"
cat >"$work/allreduce.yaml" <<'YAML'
comm: {backend: gloo, rendezvous: "file:///tmp/ddph-job", timeout: 30s}
hook: {family: default, name: allreduce}
YAML

# Everything below runs with the clone and the build hidden.
cat >"$work/checks.sh" <<'CHECKS'
set -euo pipefail
work=$1 src=$2 build=$3
fail() { echo "FAIL: $*"; exit 1; }
mount -t tmpfs none "$src"
case "$build" in "$src"/*) ;; *) mount -t tmpfs none "$build" ;; esac
[ -z "$(ls -A "$src")" ] || fail "the clone is still visible"
unset DDPH_LIBRARY DDPH_PLUGIN_PATH DDPH_BUILD_DIR PYTHONPATH
cd "$work"
py=$work/venv/bin/python
lib=$("$py" -c 'import ddphooks; print(ddphooks.library_path())')
case "$lib" in "$work"/venv/*) ;; *) fail "import ddphooks loaded $lib, not the wheel's" ;; esac
version=$("$work/venv/bin/ddph" --version)
case "$version" in "ddph 0.1.0 (ABI "*) ;; *) fail "ddph --version printed: $version" ;; esac
# Captured first: grep -q would stop reading, and the tool's SIGPIPE fail it.
listing=$("$work/venv/bin/ddph" plugins)
grep -q "allreduce" <<<"$listing" || fail "ddph plugins lists no allreduce: $listing"
out=$("$py" numpy_allreduce.py --config "$work/allreduce.yaml" --n 4096 --steps 2)
[ "$(grep -o 'rank [01]: ok' <<<"$out" | sort -u | wc -l)" = 2 ] || fail "the 2-rank NumPy allreduce: $out"
"$py" - <<'PY'
import csv
from ddphooks.metrics import CSV_COLUMNS
with open("run.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
    w.writeheader()
    for step in range(4):
        w.writerow({"step": step, "loss": 1.0 / (step + 1), "bytes_in": 4096, "bytes_out": 1024})
PY
"$py" -m ddphooks.plot run.csv -o run.png
[ "$(head -c 8 run.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "run.png is not a PNG"
echo "wheel: import, ddph --version ($version), plugins, 2-rank NumPy allreduce, plot: ok"
CHECKS
unshare -m bash "$work/checks.sh" "$work" "$src" "$build"
