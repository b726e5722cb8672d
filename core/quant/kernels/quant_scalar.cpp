// The scalar level: the reference loops of quant_loops.inc, compiled for
// plain x86-64 (the compiler may still use SSE2 where it can).

#include "core/quant/kernels/quant_math.h"
#include "core/quant/kernels/quant_table.h"

namespace ddph {
namespace quantization {
namespace {

#include "core/quant/kernels/quant_loops.inc"

}  // namespace

const QuantTable& quant_table_scalar() {
  static const QuantTable table = make_quant_table<ScalarSpans>();
  return table;
}

}  // namespace quantization
}  // namespace ddph
