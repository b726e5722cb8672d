// Which instruction-set level the CPU kernels use. Chosen once at run time
// from the CPU's features (the binary itself targets plain x86-64), and
// cappable so that tests and benchmarks can run every level on one machine.
#pragma once

#include <stddef.h>

namespace ddph {

// Ordered: each level includes the ones before it.
enum class Isa : int {
  kScalar = 0,      // the reference loops of scalar.h (still SSE2-autovectorized)
  kAvx2 = 1,        // AVX2 + F16C
  kAvx512 = 2,      // AVX-512 F/BW/VL
  kAvx512Bf16 = 3,  // plus AVX-512 BF16 (vcvtneps2bf16)
};

const char* isa_name(Isa isa);
// The best level this CPU supports.
Isa isa_supported();
// The level kernels use now: isa_supported(), capped by set_isa_limit() or by
// the environment variable DDPH_KERNEL_ISA (scalar|avx2|avx512|avx512bf16).
Isa isa_active();
// Caps the level (a level the CPU lacks is never used). Returns the previous
// cap. [thread-safe], but meant for tests and benchmarks, not for hot paths.
Isa set_isa_limit(Isa limit);

// A kit's kernel table for isa_active(): simd[l - 1] returns the table of
// level Isa(l). A level the kit has no table for (past the end of simd, or
// NULL there) uses the level below, down to `scalar`. A level's function is
// only called where the CPU has its instructions.
template <class Table, size_t N>
const Table& active_table(const Table& scalar, const Table& (*const (&simd)[N])()) {
  for (size_t level = size_t(isa_active()); level > 0; --level)
    if (level <= N && simd[level - 1] != nullptr) return simd[level - 1]();
  return scalar;
}

}  // namespace ddph
