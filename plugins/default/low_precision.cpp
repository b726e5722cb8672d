#include "plugins/default/low_precision.h"

#include "core/base/error.h"

namespace ddph {
namespace default_family {

void check_low_input(const char* hook, DType dtype, DType low) {
  DDPH_CHECK(dtype == DType::F32 || dtype == DType::F64 || dtype == low, DDPH_UNSUPPORTED,
             hook << ": bucket dtype " << dtype_name(dtype) << " is not supported (float32, "
                  << "float64 or " << dtype_name(low) << ")");
}

}  // namespace default_family
}  // namespace ddph
