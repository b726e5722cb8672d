// The AVX2 + F16C level (traits in simd_avx2.inc). Half casts use
// vcvtps2ph/vcvtph2ps; bfloat16 uses the integer round-to-nearest-even trick
// (no AVX2 instruction does it). Checked with objdump: the loops compile to vcvtps2ph/vcvtph2ps on
// ymm registers, and loops.inc's loops to vaddps/vdivps/vpaddd on ymm.
#include "core/kernels/cpu_table.h"
#include "core/kernels/scalar.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace ddph {
namespace kernels {
namespace {

#include "core/kernels/loops.inc"
#include "core/kernels/simd_avx2.inc"
#include "core/kernels/simd_lowp.inc"

}  // namespace

const CpuTable& cpu_table_avx2() {
  return simd_table<VecAvx2>();
}

}  // namespace kernels
}  // namespace ddph

#pragma GCC pop_options
#endif
