#include "core/quant/codec.h"

#include "core/base/error.h"
#include "core/base/phase_span.h"
#include "core/kernels/divide.h"
#include "core/quant/rank_header.h"
#include "core/quant/segment_cuda.h"

namespace ddph {
namespace quantization {
namespace {

// ScratchBuffers keys of the codec (the protocols use 0-3).
enum : uint64_t { kParamsKey = 100, kCodesKey = 101, kFlagsKey = 102 };

}  // namespace

Codec::Codec(const Where& at, ScratchBuffers& scratch, int bits, size_t max_n, size_t max_channels,
             size_t encodings)
    : at_(at),
      on_device_(at, "quantization"),
      params_(scratch.get(at, kParamsKey, at.cuda() ? 0 : max_channels * sizeof(QParams))),
      codes_(scratch.get(at, kCodesKey, bits == 8 ? 0 : max_n)),
      flags_(scratch.get(at, kFlagsKey, at.cuda() ? encodings : 0)),
      encodings_(encodings) {
  scratch_.params = static_cast<QParams*>(params_.data());
  scratch_.codes = static_cast<uint8_t*>(codes_.data());
}

uint8_t* Codec::next_flag() {
  DDPH_CHECK(flags_used_ < encodings_, DDPH_INTERNAL,
             "quantization: more encodings than the " << encodings_ << " the protocol sized for");
  return static_cast<uint8_t*>(flags_.data()) + flags_used_++;
}

void Codec::encode(const float* x, const Segment& s, const EncodeArgs& args, uint8_t* out) {
  if (s.n == 0) return;
  PhaseSpan span(DDPH_PHASE_COMPRESS);
  if (!at_.cuda()) {
    finite_ &= encode_segment(x, s, args, out, scratch_);
    return;
  }
  encode_segment_cuda(at_, x, s, args, out, scratch_, next_flag());
}

void Codec::write_rank_header(uint8_t* out) {
  if (!at_.cuda()) return quantization::write_rank_header(out, finite_);
  write_rank_header_cuda(at_, static_cast<const uint8_t*>(flags_.data()), flags_used_, out);
}

std::vector<int> Codec::nonfinite_senders(const uint8_t* first, size_t stride, int world) {
  if (!at_.cuda()) return quantization::nonfinite_senders(first, stride, world);
  std::vector<uint8_t> headers(static_cast<size_t>(world));
  read_strided_bytes(at_, first, stride, size_t(world), headers.data(), "quantization");
  return quantization::nonfinite_senders(headers.data(), 1, world);
}

namespace {

std::vector<const uint8_t*> strided(const uint8_t* first, size_t stride, size_t count) {
  std::vector<const uint8_t*> ins(count);
  for (size_t k = 0; k < count; ++k) ins[k] = first + k * stride;
  return ins;
}

}  // namespace

void Codec::decode_mean(const uint8_t* first, size_t stride, size_t count, const Segment& s,
                        int bits, int world, float* out) {
  if (s.n == 0) return;
  PhaseSpan span(DDPH_PHASE_DECOMPRESS);
  if (!at_.cuda()) {
    const std::vector<const uint8_t*> ins = strided(first, stride, count);
    return quantization::decode_mean(ins.data(), count, s, bits, world, out, scratch_);
  }
  zero(out, s.n * sizeof(float));
  for (size_t k = 0; k < count; ++k)
    decode_cuda(at_, first + k * stride, s, bits, out, /*add=*/true, scratch_);
  divide(out, s.n, world);
  wide_means_cuda(at_, first, stride, count, s, bits, world, out);
}

void Codec::encode_mean_or_nan(const uint8_t* first, size_t stride, size_t count, const Segment& s,
                               int world, const EncodeArgs& args, float* acc, uint8_t* out) {
  if (s.n == 0) return;
  PhaseSpan span(DDPH_PHASE_COMPRESS);
  if (!at_.cuda()) {
    const std::vector<const uint8_t*> ins = strided(first, stride, count);
    if (!encode_mean(ins.data(), count, s, world, args, out, acc, scratch_))
      encode_nan(s, args.bits, out);
    return;
  }
  decode_mean(first, stride, count, s, args.bits, world, acc);
  uint8_t* flag = next_flag();
  encode_segment_cuda(at_, acc, s, args, out, scratch_, flag);
  nan_unless_finite_cuda(at_, flag, s, args.bits, out);
}

void Codec::decode_into(const uint8_t* in, const Segment& s, int bits, float* out) {
  if (s.n == 0) return;
  PhaseSpan span(DDPH_PHASE_DECOMPRESS);
  if (!at_.cuda()) return quantization::decode_into(in, s, bits, out, scratch_);
  decode_cuda(at_, in, s, bits, out, /*add=*/false, scratch_);
}

void Codec::divide(float* x, size_t n, int world) {
  divide_inplace(at_, DType::F32, x, n, world);
}

}  // namespace quantization
}  // namespace ddph
