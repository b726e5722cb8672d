// The codec as a protocol sees it: the operations of wire_segment.h and
// rank_header.h on whatever memory the bucket is in. Host buckets take the
// host functions; CUDA buckets their twins (segment_cuda.h), enqueued on the
// bucket's stream. The protocols call only this, so one protocol
// implementation serves both, and the CPU tests cover its logic.
//
// Whether encoded inputs were finite is kept in a tally: a bool on the host;
// on a GPU one device flag per encoding, which reaches the host only inside
// the rank headers, after the first exchange.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/kernels/on_device.h"
#include "core/quant/wire_segment.h"

namespace ddph {
namespace quantization {

class Codec {
 public:
  // One protocol run at `bits`: segments of up to max_n elements in up to
  // max_channels channels, and up to `encodings` calls of encode and
  // encode_mean_or_nan. Scratch comes from `scratch` (a host buffer per role,
  // reused; on a GPU pool memory leased for the run), and only what the run
  // needs: unpacked codes for bits < 8, params copies on the host (a GPU
  // reads them in place), a flag per encoding on a GPU.
  Codec(const Where& at, ScratchBuffers& scratch, int bits, size_t max_n, size_t max_channels,
        size_t encodings);

  const Where& where() const { return at_; }

  // Quantizes x into out (encoded_bytes(s, bits) bytes), adding whether x
  // was finite to the tally.
  void encode(const float* x, const Segment& s, const EncodeArgs& args, uint8_t* out);
  // The rank header of everything encoded so far (rank_header.h).
  void write_rank_header(uint8_t* out);
  // The ranks whose header, among `world` headers `stride` bytes apart from
  // first, says not finite. On a GPU this is the bucket's one host wait: the
  // fall-back-or-fail decision is the host's, and every rank must take it.
  std::vector<int> nonfinite_senders(const uint8_t* first, size_t stride, int world);
  // The mean of `count` encodings of segment s laid `stride` bytes apart from
  // `first` (wire_segment.h's decode_mean: PyTorch's float32 sum in rank
  // order, or a saturated double sum where that could overflow) into out.
  void decode_mean(const uint8_t* first, size_t stride, size_t count, const Segment& s, int bits,
                   int world, float* out);
  // The owner's mean of those encodings, encoded with args into out,
  // outside the tally. A mean that is not finite would encode as
  // encode_nan's bytes (decided on the device for a CUDA bucket); finite
  // encodings never give one. acc (s.n floats) holds the mean where the
  // host does not fuse the two (wire_segment.h's encode_mean) and always on
  // a GPU.
  void encode_mean_or_nan(const uint8_t* first, size_t stride, size_t count, const Segment& s,
                          int world, const EncodeArgs& args, float* acc, uint8_t* out);
  void decode_into(const uint8_t* in, const Segment& s, int bits, float* out);

  void zero(void* p, size_t bytes) { zero_bytes(at_, p, bytes, "quantization"); }
  void divide(float* x, size_t n, int world);

 private:
  uint8_t* next_flag();

  Where at_;
  DeviceScope on_device_;
  ScratchBuffers::Lease params_, codes_, flags_;
  CodecScratch scratch_;
  size_t encodings_ = 0, flags_used_ = 0;
  bool finite_ = true;  // the host tally
};

}  // namespace quantization
}  // namespace ddph
