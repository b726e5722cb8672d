// A software prefetch hint for streaming passes that the hardware
// prefetchers fall behind (the measurements are in docs/benchmarks.md).
#pragma once

#include <stdint.h>

namespace ddph {

// Hints the line kAheadBytes past p. The address is computed as an integer:
// it may lie past the end of the buffer, where a prefetch does not fault.
template <uintptr_t kAheadBytes, int kWrite = 0>
inline __attribute__((always_inline)) void prefetch_ahead(const void* p) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kAheadBytes),
                     kWrite);
}

}  // namespace ddph
