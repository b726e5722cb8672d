// Function multiversioning for plain loops the compiler vectorizes: GCC
// clones the function for x86-64-v4 (AVX-512), v3 (AVX2 + FMA) and the
// baseline, and picks one when the library loads. Clang (the fuzz build)
// does not clone templates, so there the function is built once.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DDPH_ISA_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DDPH_ISA_CLONES
#endif
