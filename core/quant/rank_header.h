// The 8 bytes in front of each rank's contribution in a protocol's first
// exchange. They tell every rank, in the same round trip that carries the
// codes, whether the sender's bucket held NaN or Inf, so that all ranks
// agree to fall back (or to fail) without a separate flag collective.
//
//   byte 0: bit 0 set = the sender's bucket is not finite; bytes 1-7: zero
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddph {
namespace quantization {

constexpr size_t kRankHeaderBytes = 8;

void write_rank_header(uint8_t* out, bool finite);
// The ranks whose header, among `world` contributions `stride` bytes apart
// starting at `first`, says their bucket is not finite; in rank order.
std::vector<int> nonfinite_senders(const uint8_t* first, size_t stride, int world);

}  // namespace quantization
}  // namespace ddph
