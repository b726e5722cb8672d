#include "core/kernels/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace ddph {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// CPUID bits for the features clang's __builtin_cpu_supports does not name
// (F16C, AVX512_BF16), so both compilers build this file.
bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
constexpr int kEax = 0, kEcx = 2;
#endif

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool f16c = cpuid_bit(1, 0, kEcx, 29);
  if (!__builtin_cpu_supports("avx2") || !f16c) return Isa::kScalar;
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl"))
    return Isa::kAvx2;
  if (!cpuid_bit(7, 1, kEax, 5)) return Isa::kAvx512;  // AVX512_BF16
  return Isa::kAvx512Bf16;
#else
  return Isa::kScalar;
#endif
}

Isa limit_from_env() {
  const char* v = std::getenv("DDPH_KERNEL_ISA");
  if (v == nullptr) return Isa::kAvx512Bf16;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16})
    if (std::strcmp(v, isa_name(i)) == 0) return i;
  return Isa::kAvx512Bf16;
}

std::atomic<int>& limit() {
  static std::atomic<int> value{int(limit_from_env())};
  return value;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512bf16";
  }
  return "?";
}

Isa isa_supported() {
  static const Isa best = detect();
  return best;
}

Isa isa_active() {
  const int cap = limit().load(std::memory_order_relaxed);
  const Isa best = isa_supported();
  return int(best) < cap ? best : Isa(cap);
}

Isa set_isa_limit(Isa cap) {
  return Isa(limit().exchange(int(cap)));
}

}  // namespace ddph
