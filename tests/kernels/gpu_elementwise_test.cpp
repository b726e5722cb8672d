// The CUDA twins of the core kernels (core/kernels/cuda/elementwise_cuda.h)
// against the CPU kernels, bit for bit, on the corner cases of the 16-bit
// formats and random bytes of every dtype. The one allowed difference is a
// NaN's payload (x86 and the GPU make different default NaNs, as IEEE
// allows); every other value must match exactly. Each test skips with one
// line where no GPU is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/cast.h"
#include "core/kernels/cuda/elementwise_cuda.h"
#include "core/kernels/divide.h"
#include "tests/kernels/corner_cases.h"
#include "tests/support/cuda_device.h"

namespace {

using ddph::DType;
using ddph_test::DeviceVec;

// Index of the first element that differs (other than NaN against NaN), or n.
size_t first_diff(DType t, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const size_t es = ddph::dtype_size(t), n = a.size() / es;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* x = a.data() + i * es;
    const uint8_t* y = b.data() + i * es;
    if (std::memcmp(x, y, es) != 0 && !(ddph_test::is_nan(t, x) && ddph_test::is_nan(t, y)))
      return i;
  }
  return n;
}

std::vector<uint8_t> inputs_of(DType t, size_t n) {
  if (t == DType::F32) {
    std::vector<float> f = ddph_test::float_corner_cases(n);
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    return bytes;
  }
  if (t == DType::F16 || t == DType::BF16) {
    std::vector<uint16_t> all = ddph_test::all_16bit_patterns();
    std::vector<uint8_t> bytes(all.size() * 2);
    std::memcpy(bytes.data(), all.data(), bytes.size());
    return bytes;
  }
  return ddph_test::random_bytes(n * ddph::dtype_size(t), 7);
}

const DType kAll[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                      DType::I32, DType::I64, DType::U8};

TEST(GpuElementwise, DivideMatchesTheCpuForEveryDtypeAndDivisor) {
  DDPH_SKIP_WITHOUT_GPU();
  for (DType t : kAll) {
    for (int64_t w : {1, 2, 3, 7, 8, 1000}) {
      std::vector<uint8_t> cpu = inputs_of(t, 4099);
      DeviceVec<uint8_t> gpu(cpu);
      ddph::divide_inplace(t, cpu.data(), cpu.size() / ddph::dtype_size(t), w);
      ASSERT_EQ(
          ddph::cuda::divide_inplace(t, gpu.get(), cpu.size() / ddph::dtype_size(t), w, nullptr),
          cudaSuccess);
      std::vector<uint8_t> back = gpu.host();
      const size_t at = first_diff(t, cpu, back);
      EXPECT_EQ(at, cpu.size() / ddph::dtype_size(t))
          << ddph::dtype_name(t) << " / " << w << " differs at element " << at;
    }
  }
}

TEST(GpuElementwise, CastsBothWaysMatchTheCpu) {
  DDPH_SKIP_WITHOUT_GPU();
  for (DType wide : {DType::F32, DType::F64}) {
    for (DType low : {DType::F16, DType::BF16}) {
      // Down: wide -> low.
      std::vector<uint8_t> src = inputs_of(wide, 5003);
      const size_t n = src.size() / ddph::dtype_size(wide);
      std::vector<uint8_t> cpu(n * 2);
      ddph::cast_into(wide, src.data(), low, cpu.data(), n);
      DeviceVec<uint8_t> dsrc(src), ddst(n * 2);
      ASSERT_EQ(ddph::cuda::cast_into(wide, dsrc.get(), low, ddst.get(), n, nullptr), cudaSuccess);
      EXPECT_EQ(first_diff(low, cpu, ddst.host()), n)
          << ddph::dtype_name(wide) << " -> " << ddph::dtype_name(low);
      // Up: every 16-bit pattern -> wide.
      std::vector<uint8_t> lows = inputs_of(low, 0);
      const size_t m = lows.size() / 2;
      std::vector<uint8_t> up(m * ddph::dtype_size(wide));
      ddph::cast_into(low, lows.data(), wide, up.data(), m);
      DeviceVec<uint8_t> dl(lows), dup(up.size());
      ASSERT_EQ(ddph::cuda::cast_into(low, dl.get(), wide, dup.get(), m, nullptr), cudaSuccess);
      EXPECT_EQ(first_diff(wide, up, dup.host()), m)
          << ddph::dtype_name(low) << " -> " << ddph::dtype_name(wide);
    }
  }
}

TEST(GpuElementwise, CastDivideMatchesTheCpu) {
  DDPH_SKIP_WITHOUT_GPU();
  for (DType from : {DType::F32, DType::F64, DType::F16}) {
    for (DType low : {DType::F16, DType::BF16}) {
      if (from == DType::F16 && low != DType::F16) continue;
      std::vector<uint8_t> src = inputs_of(from, 4001);
      const size_t n = src.size() / ddph::dtype_size(from);
      for (int64_t w : {1, 3, 4}) {
        std::vector<uint16_t> cpu(n);
        ddph::cast_div_into(from, src.data(), low, cpu.data(), n, w);
        DeviceVec<uint8_t> dsrc(src);
        DeviceVec<uint16_t> ddst(n);
        ASSERT_EQ(ddph::cuda::cast_div_into(from, dsrc.get(), low, ddst.get(), n, w, nullptr),
                  cudaSuccess);
        std::vector<uint16_t> back = ddst.host();
        std::vector<uint8_t> a(n * 2), b(n * 2);
        std::memcpy(a.data(), cpu.data(), a.size());
        std::memcpy(b.data(), back.data(), b.size());
        EXPECT_EQ(first_diff(low, a, b), n)
            << ddph::dtype_name(from) << " -> " << ddph::dtype_name(low) << " / " << w;
      }
    }
  }
}

TEST(GpuElementwise, RefusesWhatTheCpuRefuses) {
  // Argument checks happen before any launch, so they need no device.
  EXPECT_EQ(ddph::cuda::divide_inplace(DType::F32, nullptr, 0, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ddph::cuda::cast_into(DType::I32, nullptr, DType::F16, nullptr, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(ddph::cuda::cast_div_into(DType::F32, nullptr, DType::F32, nullptr, 0, 2, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
