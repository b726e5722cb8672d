#!/usr/bin/env bash
# Packs what the GPU tests and benchmarks need to run on a machine that has
# a GPU but not this project's Debian packages (the `device` machine lent to
# some sessions): the `gpu`-labelled test binaries, ddph, the GPU kernel
# benchmark, libddph and the plugins, stripped, plus the Debian libraries
# they link (Gloo, yaml-cpp, OpenBLAS/LAPACK, hiredis, benchmark) and the
# CTest list of GPU tests. NCCL, cuBLAS and cuSOLVER come from the GPU
# machine's own CUDA install (device.sh finds them).
#   tests/gpu_machine/pack.sh [BUILD_DIR]   -> build-dev/pack.tar.xz
# Then, on the GPU machine, from the repository root:
#   tar -xJf build-dev/pack.tar.xz -C build-dev && bash build-dev/pack/device.sh tests|bench|overlap|auto
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
here=tests/gpu_machine
out=build-dev/pack
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib/ddphooks" "$out/sys"
ctest --test-dir "$build" -L gpu --show-only=json-v1 > build-dev/gpu_tests_ctest.json
/usr/bin/python3 "$here/ctest_list.py" build-dev/gpu_tests_ctest.json "$out/gpu_tests.json" \
  "$(cd "$build" && pwd)" > build-dev/gpu_binaries.txt
for b in $(cat build-dev/gpu_binaries.txt) ddph ddph_bench_gpu_kernels; do
  strip -o "$out/bin/$b" "$build/bin/$b"
done
strip -o "$out/lib/libddph.so.0.1.0" "$build/lib/libddph.so.0.1.0"
ln -s libddph.so.0.1.0 "$out/lib/libddph.so.1"
ln -s libddph.so.1 "$out/lib/libddph.so"
for p in "$build"/lib/ddphooks/*.so; do
  # comm_mpi would need Open MPI there too; nothing GPU uses it.
  [ "$(basename "$p")" = libddph_comm_mpi.so ] || strip -o "$out/lib/ddphooks/$(basename "$p")" "$p"
done
for l in libgloo.so.0 libyaml-cpp.so.0.7 libopenblas.so.0 libblas.so.3 liblapack.so.3 \
         liblapacke.so.3 libtmglib.so.3 libgfortran.so.5 libquadmath.so.0 libhiredis.so.0.14 \
         libbenchmark.so.1debian; do
  cp -L "$(/sbin/ldconfig -p | awk -v n="$l" '$1 == n {print $NF; exit}')" "$out/sys/$l"
done
cp "$here/device.sh" "$here/run_tests.py" "$here/hook_bench.sh" "$here/overlap_bench.sh" \
  "$here/auto_bench.sh" "$out/"
tar -cJf build-dev/pack.tar.xz -C build-dev pack
ls -la build-dev/pack.tar.xz
