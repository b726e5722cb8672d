// The AVX-512 level with BF16: float -> bfloat16 uses vcvtneps2bf16 (traits
// in simd_avx512bf16.inc, the rest is the AVX-512 level's).
#define DDPH_LEVEL_TARGET "avx2,f16c,avx512f,avx512bw,avx512vl,avx512bf16"
#define DDPH_LEVEL_TRAITS "core/kernels/simd_avx512bf16.inc"
#define DDPH_LEVEL_VEC VecAvx512Bf16
#define DDPH_LEVEL_TABLE cpu_table_avx512bf16
#include "core/kernels/cpu_level.inc"
