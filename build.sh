#!/usr/bin/env bash
# The one set-up script, for users and CI alike: installs the Debian packages
# that are missing, configures and builds into build/.
#   ./build.sh          install what building and running need, and build
#   ./build.sh python   ... also the newest PyTorch and JAX from PyPI, each in
#                       a virtual environment outside the clone
#                       (DDPH_TORCH_VENV, DDPH_JAX_VENV; default
#                       ~/.cache/ddphooks/venv-torch-latest, venv-jax), and
#                       build/python-torch-latest, build/python-jax: those
#                       Pythons with this checkout's ddphooks importable
#   ./build.sh wheel    ... also build/dist/ddphooks-<version>-py3-none-linux_<arch>.whl,
#                       the ddphooks package with this build's libddph.so,
#                       plugins and ddph tool inside (docs/python.md)
#   ./build.sh test     ... also what the tests need and the above, then run the whole
#                       test suite (CTest), the fuzzers
#                       (DDPH_FUZZ_SECONDS each, default 60; 0 skips)
#                       and the suite under sanitizers (DDPH_SANITIZE_RUNS,
#                       default "asan tsan"; 0 skips)
set -euo pipefail
cd "$(dirname "$0")"

# Each phase's seconds, printed as a table when the script ends (passed or
# not): build.sh's own phases, and the build and run halves that
# tests/fuzz/run_fuzzers.sh and tests/sanitize/run_sanitized.sh append to the
# same file (DDPH_PHASE_LOG, "name<TAB>seconds" lines). docs/testing.md keeps
# the table of a run at a named commit.
if [ "${1:-}" = "test" ]; then
  export DDPH_PHASE_LOG=${DDPH_PHASE_LOG:-$(mktemp /tmp/ddph-phases-XXXXXX)}
else
  DDPH_PHASE_LOG=/dev/null # a plain build prints no table
fi
run_start=$(date +%s)
phase_start=$run_start
end_phase() { # end_phase NAME: the seconds since the last phase ended
  local now
  now=$(date +%s)
  printf '%s\t%s\n' "$1" $((now - phase_start)) >>"$DDPH_PHASE_LOG"
  phase_start=$now
}
print_phases() {
  local status=$?
  echo
  echo "build.sh: seconds per phase (exit status $status)"
  awk -F'\t' '{ printf "  %-34s %6d\n", $1, $2 }' "$DDPH_PHASE_LOG"
  printf '  %-34s %6d\n' total $(($(date +%s) - run_start))
}
[ "${1:-}" = "test" ] && trap print_phases EXIT

# What building and running need ...
packages=(
  cmake ninja-build g++ pkg-config          # toolchain
  ccache                                    # rebuilds compile only what changed
  libgloo-dev libyaml-cpp-dev libdlpack-dev # Gloo engine, YAML config, DLPack tensors
  libhiredis-dev libssl-dev                 # Redis rendezvous store; HMAC for a job's secret
  libopenblas-dev liblapacke-dev            # powersgd: cblas_sgemm, LAPACKE QR
  iproute2                                  # ip and tc: the network lab (ddph lab, --link)
  libcli11-dev                              # the ddph tool's command line
  nlohmann-json3-dev                        # the ddph tool's --json lines (header only)
)
# ... and what only the tests add (the MPI communicator is built whenever
# Open MPI is installed: `apt-get install libopenmpi-dev openmpi-bin`).
test_packages=(
  libgtest-dev libbenchmark-dev             # tests and benchmarks
  redis-server                              # Redis rendezvous tests
  python3-torch python3-numpy               # PyTorch reference for parity tests
  python3-pytest                            # tests/python (the ddphooks package)
  python3-matplotlib                        # benchmark plots (docs/bench)
  binutils                                  # nm, for the exported-symbol test
  abigail-tools                             # abidiff, for the ABI stability test
  clang-14                                  # libFuzzer and sanitizers (tests/fuzz)
  libopenmpi-dev openmpi-bin                # MPI communicator (plugins/comm_mpi) and mpirun
  dataset-fashion-mnist                     # Fashion-MNIST: benchmarks/time_to_accuracy and its smoke test
)
# ... and what the PyTorch 2 environment needs (python and test).
python_packages=(
  python3-venv                              # the virtual environment of build/python-torch-latest
)
# ... and what the wheel needs (wheel and test): pip wheel and objcopy.
wheel_packages=(
  python3-pip python3-setuptools python3-wheel # pip wheel ./python (no build isolation, offline)
  binutils                                  # objcopy --strip-debug of what the wheel carries
)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
[ "${1:-}" = "test" ] && packages+=("${test_packages[@]}")
case "${1:-}" in test | python) packages+=("${python_packages[@]}") ;; esac
case "${1:-}" in test | wheel) packages+=("${wheel_packages[@]}") ;; esac
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "build.sh: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
end_phase "install packages"

# ccache keys on paths relative to the clone, so a fresh clone in another
# folder (CI's) reuses what an earlier build of the same sources compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}

# The test suite is built when GoogleTest is there (always after `test`).
tests=OFF
installed libgtest-dev && tests=ON

build_dir=${DDPH_BUILD_DIR:-build}

# python_wrapper NAME PYTHON WHAT: build/NAME runs PYTHON with this
# checkout's ddphooks importable (the package finds build/lib/libddph.so by
# itself), so a fresh clone needs no install and no PYTHONPATH.
python_wrapper() {
  mkdir -p "$build_dir"
  printf '%s\n' '#!/bin/sh' "# Written by build.sh: $3 ($2)" "# and ddphooks from $PWD/python." \
    "PYTHONPATH=\"$PWD/python\${PYTHONPATH:+:\$PYTHONPATH}\" exec \"$2\" \"\$@\"" \
    >"$build_dir/$1"
  chmod +x "$build_dir/$1"
}
# pinned_venv DIR REQUIREMENTS: a virtual environment outside the clone with
# REQUIREMENTS installed, made again only when that file changes (so a
# second run, or CI's fresh clone on the same machine, downloads nothing).
pinned_venv() {
  if ! cmp -s "$2" "$1/.ddph-requirements"; then
    echo "build.sh: installing $(grep -m1 -v '^#' "$2") and the rest of $2 into $1"
    rm -rf "$1"
    /usr/bin/python3 -m venv "$1"
    "$1/bin/python" -m pip install -q --no-warn-script-location -r "$2"
    cp "$2" "$1/.ddph-requirements"
  fi
}
python_wrapper python3 /usr/bin/python3 "Debian's Python (torch 1.13, numpy, matplotlib)"

# The newest PyTorch beside Debian's 1.13, and JAX, each in its own virtual
# environment: build/python-torch-latest and build/python-jax. CMake
# registers the Python tests under them too (tests/python/CMakeLists.txt).
if [ "${1:-}" = "test" ] || [ "${1:-}" = "python" ]; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/ddphooks
  venv=${DDPH_TORCH_VENV:-$cache/venv-torch-latest}
  pinned_venv "$venv" python/requirements-torch-latest.txt
  python_wrapper python-torch-latest "$venv/bin/python" \
    "Python with $(grep -m1 '^torch==' python/requirements-torch-latest.txt)"
  end_phase "PyTorch 2 environment"
  venv=${DDPH_JAX_VENV:-$cache/venv-jax}
  pinned_venv "$venv" python/requirements-jax.txt
  python_wrapper python-jax "$venv/bin/python" \
    "Python with $(grep -m1 '^jax==' python/requirements-jax.txt)"
  end_phase "JAX environment"
fi
# What tests/install/wheel_test.sh installs beside the wheel into a fresh
# virtual environment (numpy, matplotlib), downloaded once into a wheelhouse
# outside the clone, again only when the requirements change.
if [ "${1:-}" = "test" ]; then
  wheelhouse=${DDPH_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/ddphooks/wheelhouse}
  if ! cmp -s python/requirements-wheel-test.txt "$wheelhouse/.ddph-requirements"; then
    echo "build.sh: downloading the wheel test's numpy and matplotlib into $wheelhouse"
    mkdir -p "$wheelhouse"
    /usr/bin/python3 -m pip download -q -d "$wheelhouse" -r python/requirements-wheel-test.txt
    cp python/requirements-wheel-test.txt "$wheelhouse/.ddph-requirements"
  fi
  end_phase "wheel test's wheelhouse"
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${DDPH_BUILD_TYPE:-RelWithDebInfo} \
  -DDDPH_BUILD_TESTS=$tests
cmake --build "$build_dir" -j2
end_phase "configure and build"

if [ "${1:-}" = "wheel" ]; then
  rm -rf "$build_dir/dist" "$build_dir/wheel-src"
  # pip builds in the source folder: a copy keeps python/ clean.
  cp -r python "$build_dir/wheel-src"
  DDPH_WHEEL_BUILD_DIR=$(realpath "$build_dir") /usr/bin/python3 -m pip wheel -q --no-deps \
    --no-build-isolation -w "$build_dir/dist" "$build_dir/wheel-src"
  echo "build.sh: $(ls "$build_dir"/dist/ddphooks-*.whl)"
fi

if [ "${1:-}" = "test" ]; then
  ctest_status=0
  ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 300 || ctest_status=$?
  end_phase "ctest"
  [ "$ctest_status" -eq 0 ] || exit "$ctest_status"
  # libFuzzer + ASan/UBSan on the config loader, checkpoint blobs and
  # adversarial buckets, DDPH_FUZZ_SECONDS each (tests/fuzz; 0 skips).
  if [ "${DDPH_FUZZ_SECONDS:-60}" != 0 ]; then
    tests/fuzz/run_fuzzers.sh "${DDPH_FUZZ_SECONDS:-60}"
  fi
  # The suite again in a GCC ASan + UBSan build and in a TSan build
  # (tests/sanitize; DDPH_SANITIZE_RUNS=0 skips, =asan or =tsan runs one).
  runs=${DDPH_SANITIZE_RUNS:-asan tsan}
  if [ "$runs" != 0 ]; then
    status=0
    for kind in $runs; do
      tests/sanitize/run_sanitized.sh "$kind" || status=1
    done
    exit $status
  fi
fi
