#include "plugins/default/low_precision.h"

#include "core/base/error.h"
#include "core/base/phase_span.h"

namespace ddph {
namespace default_family {

void check_low_input(const char* hook, DType dtype, DType low) {
  DDPH_CHECK(dtype == DType::F32 || dtype == DType::F64 || dtype == low, DDPH_UNSUPPORTED,
             hook << ": bucket dtype " << dtype_name(dtype) << " is not supported (float32, "
                  << "float64 or " << dtype_name(low) << ")");
}

void reduce_low_copy(const ddph_bucket_t& bucket, DType dtype, DType low, int divide_by,
                     ScratchBuffers& scratch, const std::function<void(FlatTensor&)>& reduce) {
  const size_t n = size_t(bucket.buffer.shape[0]);
  void* data = data_ptr(bucket.buffer);
  const Where at = where_of(bucket);
  ScratchBuffers::Lease lease = scratch.get(at, bucket.index, n * 2);
  uint16_t* copy = static_cast<uint16_t*>(lease.data());
  {
    PhaseSpan span(DDPH_PHASE_COMPRESS);
    if (divide_by != 0)
      cast_div_into(at, dtype, data, low, copy, n, divide_by);
    else
      cast_into(at, dtype, data, low, copy, n);
  }
  FlatTensor buf(copy, low, int64_t(n), bucket.buffer.device);
  reduce(buf);
  PhaseSpan span(DDPH_PHASE_DECOMPRESS);
  cast_into(at, low, copy, dtype, data, n);
}

}  // namespace default_family
}  // namespace ddph
