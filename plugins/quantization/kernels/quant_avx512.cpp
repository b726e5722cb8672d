// The avx512 level (vector spans to come; until then the scalar table is used).
#include "plugins/quantization/kernels/quant_table.h"

namespace ddph {
namespace quant {

const QuantTable* quant_table_avx512() { return nullptr; }

}  // namespace quant
}  // namespace ddph
