// The AVX-512 F/BW/VL level: 16 lanes per step. Half casts are
// vcvtps2ph/vcvtph2ps on zmm registers (checked with objdump); bfloat16
// uses the integer rounding trick and vpmovdw.
#include "core/kernels/cpu_table.h"
#include "core/kernels/scalar.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c,avx512f,avx512bw,avx512vl")

namespace ddph {
namespace kernels {
namespace {

#include "core/kernels/loops.inc"
#include "core/kernels/simd_avx512.inc"
#include "core/kernels/simd_lowp.inc"

}  // namespace

const CpuTable& cpu_table_avx512() {
  return simd_table<VecAvx512>();
}

}  // namespace kernels
}  // namespace ddph

#pragma GCC pop_options
#endif
