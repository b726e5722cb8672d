#!/usr/bin/env bash
# The one set-up script, for users and CI alike: installs the Debian packages
# that are missing, configures and builds into build/.
#   ./build.sh          install what building and running need, and build
#   ./build.sh python   ... also the newest PyTorch from PyPI in a virtual
#                       environment outside the clone (DDPH_TORCH_VENV,
#                       default ~/.cache/ddphooks/venv-torch-latest), and
#                       build/python-torch-latest: that Python with this
#                       checkout's ddphooks importable
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

# The newest PyTorch beside Debian's 1.13: a virtual environment outside the
# clone, made again only when python/requirements-torch-latest.txt changes
# (so a second run, or CI's fresh clone on the same machine, downloads
# nothing), and build/python-torch-latest, which runs it with this
# checkout's ddphooks importable. CMake registers the Python tests under it
# too (tests/python/CMakeLists.txt).
if [ "${1:-}" = "test" ] || [ "${1:-}" = "python" ]; then
  venv=${DDPH_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ddphooks/venv-torch-latest}
  requirements=python/requirements-torch-latest.txt
  torch_pin=$(grep -m1 '^torch==' "$requirements")
  if ! cmp -s "$requirements" "$venv/.ddph-requirements"; then
    echo "build.sh: installing $torch_pin into $venv"
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --no-warn-script-location -r "$requirements"
    cp "$requirements" "$venv/.ddph-requirements"
  fi
  mkdir -p "$build_dir"
  printf '%s\n' '#!/bin/sh' \
    "# Written by build.sh: Python with $torch_pin ($venv)" \
    "# and ddphooks from $PWD/python." \
    "PYTHONPATH=\"$PWD/python\${PYTHONPATH:+:\$PYTHONPATH}\" exec \"$venv/bin/python\" \"\$@\"" \
    >"$build_dir/python-torch-latest"
  chmod +x "$build_dir/python-torch-latest"
  end_phase "PyTorch 2 environment"
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
# build/python3: Debian's Python (torch 1.13, numpy, matplotlib) with this
# checkout's ddphooks importable, so `build/python3 -m ddphooks.plot` works
# from a fresh clone with no install and no PYTHONPATH.
printf '%s\n' '#!/bin/sh' "# Written by build.sh: /usr/bin/python3 with ddphooks from $PWD/python." \
  "PYTHONPATH=\"$PWD/python\${PYTHONPATH:+:\$PYTHONPATH}\" exec /usr/bin/python3 \"\$@\"" \
  >"$build_dir/python3"
chmod +x "$build_dir/python3"
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
