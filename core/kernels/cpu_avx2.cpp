// The AVX2 + F16C level (traits in simd_avx2.inc). Half casts use
// vcvtps2ph/vcvtph2ps; bfloat16 uses the integer round-to-nearest-even trick
// (no AVX2 instruction does it). Checked with objdump: the loops compile to vcvtps2ph/vcvtph2ps on
// ymm registers, and loops.inc's loops to vaddps/vdivps/vpaddd on ymm.
#define DDPH_LEVEL_TARGET "avx2,f16c"
#define DDPH_LEVEL_TRAITS "core/kernels/simd_avx2.inc"
#define DDPH_LEVEL_VEC VecAvx2
#define DDPH_LEVEL_TABLE cpu_table_avx2
#include "core/kernels/cpu_level.inc"
