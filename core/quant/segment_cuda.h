// The CUDA twins of the codec functions (wire_segment.h, rank_header.h),
// for Codec (codec.h): the same bytes, enqueued on at's stream, with the
// caller's device current. The scratch pointers are device memory; the
// finite results are device flags (quant_cuda.h). In a build without CUDA
// each is DDPH_UNSUPPORTED.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/kernels/on_device.h"
#include "core/quant/wire_segment.h"

namespace ddph {
namespace quantization {

void encode_segment_cuda(const Where& at, const float* x, const Segment& s, const EncodeArgs& args,
                         uint8_t* out, const CodecScratch& scratch, uint8_t* finite);
void write_rank_header_cuda(const Where& at, const uint8_t* flags, size_t count, uint8_t* out);
// out becomes encode_nan's bytes when *finite is 0.
void nan_unless_finite_cuda(const Where& at, const uint8_t* finite, const Segment& s, int bits,
                            uint8_t* out);
void decode_cuda(const Where& at, const uint8_t* in, const Segment& s, int bits, float* out,
                 bool add, const CodecScratch& scratch);
// After a float32 mean of `count` encodings `stride` bytes apart from
// first: the channels that decode_mean sums in double get that mean.
void wide_means_cuda(const Where& at, const uint8_t* first, size_t stride, size_t count,
                     const Segment& s, int bits, int world, float* out);

}  // namespace quantization
}  // namespace ddph
