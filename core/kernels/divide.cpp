#include "core/kernels/divide.h"

#include <cstring>

#include "core/base/error.h"
#include "core/kernels/cpu_table.h"

namespace ddph {

void divide_inplace(DType dtype, void* data, size_t n, int64_t w) {
  DDPH_CHECK(w >= 1, DDPH_INVALID_ARGUMENT, "divide_inplace: divisor " << w << " is below 1");
  const kernels::CpuTable& t = kernels::cpu_table();
  switch (dtype) {
    case DType::F32:
      return t.div_f32(static_cast<float*>(data), n, float(w));
    case DType::F64:
      return t.div_f64(static_cast<double*>(data), n, double(w));
    case DType::F16:
      return t.div_f16(static_cast<uint16_t*>(data), n, float(w));
    case DType::BF16:
      return t.div_bf16(static_cast<uint16_t*>(data), n, float(w));
    case DType::I32:
      // Any int32 divided by w > INT32_MAX truncates to zero.
      if (w > INT32_MAX) return (void)std::memset(data, 0, n * sizeof(int32_t));
      return t.div_i32(static_cast<int32_t*>(data), n, int32_t(w));
    case DType::I64:
      return t.div_i64(static_cast<int64_t*>(data), n, w);
    case DType::U8:
      // Any uint8 divided by w > 255 truncates to zero.
      if (w > 255) return (void)std::memset(data, 0, n);
      return t.div_u8(static_cast<uint8_t*>(data), n, uint8_t(w));
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT, "divide_inplace: unknown dtype " << int(dtype));
}

}  // namespace ddph
