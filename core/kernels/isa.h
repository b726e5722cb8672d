// Which instruction-set level the CPU kernels use. Chosen once at run time
// from the CPU's features (the binary itself targets plain x86-64), and
// cappable so that tests and benchmarks can run every level on one machine.
#pragma once

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

}  // namespace ddph
