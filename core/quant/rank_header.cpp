#include "core/quant/rank_header.h"

#include <cstring>

namespace ddph {
namespace quantization {

void write_rank_header(uint8_t* out, bool finite) {
  std::memset(out, 0, kRankHeaderBytes);
  out[0] = finite ? 0 : 1;
}

std::vector<int> nonfinite_senders(const uint8_t* first, size_t stride, int world) {
  std::vector<int> bad;
  for (int r = 0; r < world; ++r)
    if ((first[size_t(r) * stride] & 1) != 0) bad.push_back(r);
  return bad;
}

}  // namespace quantization
}  // namespace ddph
