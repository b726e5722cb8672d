// The AVX-512 F/BW/VL level: 16 lanes per step. Half casts are
// vcvtps2ph/vcvtph2ps on zmm registers (checked with objdump); bfloat16
// uses the integer rounding trick and vpmovdw.
#define DDPH_LEVEL_TARGET "avx2,f16c,avx512f,avx512bw,avx512vl"
#define DDPH_LEVEL_TRAITS "core/kernels/simd_avx512.inc"
#define DDPH_LEVEL_VEC VecAvx512
#define DDPH_LEVEL_TABLE cpu_table_avx512
#include "core/kernels/cpu_level.inc"
