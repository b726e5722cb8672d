// Function multiversioning for plain loops the compiler vectorizes: GCC
// clones the function for x86-64-v4 (AVX-512), v3 (AVX2 + FMA) and the
// baseline, and picks one when the library loads. Clang (the fuzz build)
// does not clone templates, so there the function is built once. Nor does
// the TSan build: the loader runs a clone's resolver while relocating the
// program, before the TSan runtime has started, and GCC instruments the
// resolver, so a test that links such a file crashes at start.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define DDPH_ISA_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DDPH_ISA_CLONES
#endif
