#include "core/quant/segment_cuda.h"

#include "core/base/error.h"
#include "core/quant/rank_header.h"
#ifdef DDPH_HAVE_CUDA
#include "core/kernels/cuda/cuda_check.h"
#include "core/quant/kernels/quant_cuda.h"
#endif

namespace ddph {
namespace quantization {

#ifdef DDPH_HAVE_CUDA
namespace {

cudaStream_t stream_of(const Where& at) {
  return static_cast<cudaStream_t>(at.stream);
}
constexpr const char* kWho = "quantization";

}  // namespace

void encode_segment_cuda(const Where& at, const float* x, const Segment& s, const EncodeArgs& args,
                         uint8_t* out, const CodecScratch& scratch, uint8_t* finite) {
  const size_t head = params_bytes(s);
  QuantizeArgs a = quantize_args(x, s, args);
  if (a.residual_out != nullptr) {
    // The GPU kernel updates in place: a device copy first costs the GPU
    // little, and the kept residual is still never written.
    DDPH_CUDA_CHECK(cudaMemcpyAsync(a.residual_out, a.residual, s.n * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream_of(at)),
                    kWho);
    a.residual = a.residual_out;
    a.residual_out = nullptr;
  }
  // The params go straight into place: segments start 8-byte aligned
  // (params_bytes), which is all the float params need.
  a.params = reinterpret_cast<QParams*>(out);
  a.q = args.bits == 8 ? out + head : scratch.codes;
  DDPH_CUDA_CHECK(quantize_channels_cuda(a, finite, stream_of(at)), kWho);
  if (args.bits != 8)
    DDPH_CUDA_CHECK(pack_cuda(a.q, s.n, args.bits, out + head, stream_of(at)), kWho);
  const size_t used = head + packed_bytes(s.n, args.bits);
  zero_bytes(at, out + used, encoded_bytes(s, args.bits) - used, kWho);
}

void write_rank_header_cuda(const Where& at, const uint8_t* flags, size_t count, uint8_t* out) {
  DDPH_CUDA_CHECK(not_all_flags_cuda(flags, count, out, kRankHeaderBytes, stream_of(at)), kWho);
}

void nan_unless_finite_cuda(const Where& at, const uint8_t* finite, const Segment& s, int bits,
                            uint8_t* out) {
  const size_t head = params_bytes(s);
  DDPH_CUDA_CHECK(
      nan_unless_finite_cuda(finite, reinterpret_cast<QParams*>(out), segment_channels(s),
                             encoded_bytes(s, bits) - head, stream_of(at)),
      kWho);
}

void decode_cuda(const Where& at, const uint8_t* in, const Segment& s, int bits, float* out,
                 bool add, const CodecScratch& scratch) {
  const auto* params = reinterpret_cast<const QParams*>(in);  // aligned: params_bytes
  const uint8_t* codes = in + params_bytes(s);
  if (bits != 8) {
    DDPH_CUDA_CHECK(unpack_cuda(codes, s.n, bits, scratch.codes, stream_of(at)), kWho);
    codes = scratch.codes;
  }
  DDPH_CUDA_CHECK(add ? dequantize_add_cuda(codes, s.n, s.channel, params, out, stream_of(at))
                      : dequantize_into_cuda(codes, s.n, s.channel, params, out, stream_of(at)),
                  kWho);
}

void wide_means_cuda(const Where& at, const uint8_t* first, size_t stride, size_t count,
                     const Segment& s, int bits, int world, float* out) {
  DDPH_CUDA_CHECK(wide_means_cuda(first, stride, count, s.n, s.channel, params_bytes(s), bits,
                                  world, out, stream_of(at)),
                  kWho);
}

#else

void encode_segment_cuda(const Where&, const float*, const Segment&, const EncodeArgs&, uint8_t*,
                         const CodecScratch&, uint8_t*) {
  refuse_cuda_memory("quantization");
}
void write_rank_header_cuda(const Where&, const uint8_t*, size_t, uint8_t*) {
  refuse_cuda_memory("quantization");
}
void nan_unless_finite_cuda(const Where&, const uint8_t*, const Segment&, int, uint8_t*) {
  refuse_cuda_memory("quantization");
}
void decode_cuda(const Where&, const uint8_t*, const Segment&, int, float*, bool,
                 const CodecScratch&) {
  refuse_cuda_memory("quantization");
}
void wide_means_cuda(const Where&, const uint8_t*, size_t, size_t, const Segment&, int, int,
                     float*) {
  refuse_cuda_memory("quantization");
}

#endif

}  // namespace quantization
}  // namespace ddph
