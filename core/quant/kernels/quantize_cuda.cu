// The fused per-channel quantize on CUDA, in three launches on one stream:
//   1. min/max: each block reduces its piece of a channel (CUB) and merges
//      the result into params[c] with integer atomics (see below);
//   2. qparams: one thread per channel turns min/max into QParams in place;
//   3. quantize: codes and, with error feedback, the new residual.
// Min and max are exact, so the merge order cannot change a bit and the
// result equals the CPU's sequential loop. The per-element math is
// quant_math.h, the CPU's own.
#include <cub/block/block_reduce.cuh>

#include "core/quant/kernels/quant_cuda.h"
#include "core/quant/kernels/quant_math.h"
#include "core/quant/kernels/quant_tiles_cuda.h"

namespace ddph {
namespace quantization {
namespace {

using tiles::kThreads;
using tiles::Range;
using tiles::Tiles;

static_assert(sizeof(QParams) == 2 * sizeof(float), "params double as float pairs");

constexpr uint32_t kAbsMask = 0x7FFFFFFFu;
constexpr uint32_t kInfBits = 0x7F800000u;

struct MinOp {
  __device__ float operator()(float a, float b) const { return b < a ? b : a; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

// The value quantized: with error feedback x + r, saturated (ef_value), as
// the CPU's saturated channels compute it.
template <bool kEf>
__device__ inline float value_at(const float* x, const float* r, size_t i) {
  return kEf ? ef_value(x[i], r[i]) : x[i];
}

// The largest |.| bit pattern of the inputs of element i: x, and r with
// error feedback. A finite x + r past FLT_MAX saturates instead of making
// the bucket non-finite; a NaN or Inf x or r does.
template <bool kEf>
__device__ inline uint32_t input_abs_bits(const float* x, const float* r, size_t i) {
  const uint32_t a = kernels::float_bits(x[i]) & kAbsMask;
  if (!kEf) return a;
  const uint32_t b = kernels::float_bits(r[i]) & kAbsMask;
  return a > b ? a : b;
}

// Only min(min, 0) and max(max, 0) reach qparams_from_minmax, so the
// accumulators start at +0 (a zero memset) and only a negative minimum or a
// positive maximum is merged. For floats of one sign the bit patterns order
// like the values (reversed for negatives, hence max of the unsigned bits),
// so integer atomicMax merges them exactly. NaN fails both compares and is
// caught by the finiteness flag instead.
template <bool kEf>
__global__ void __launch_bounds__(kThreads)
    minmax_kernel(const float* x, const float* r, Tiles t, float* minmax, uint8_t* all_finite) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage tmp_min, tmp_max;
  // b is the same for every thread of the block, so all reach each barrier.
  for (size_t b = blockIdx.x; b < t.blocks; b += gridDim.x) {
    const Range rg = tiles::tile_range(t, b);
    float mn = 0.0f, mx = 0.0f;
    uint32_t amax = 0;
    for (size_t i = rg.begin + threadIdx.x; i < rg.end; i += kThreads) {
      const float v = value_at<kEf>(x, r, i);
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
      const uint32_t a = input_abs_bits<kEf>(x, r, i);
      amax = a > amax ? a : amax;
    }
    if (amax >= kInfBits) *all_finite = 0;  // every writer stores the same byte

    mn = Reduce(tmp_min).Reduce(mn, MinOp());
    mx = Reduce(tmp_max).Reduce(mx, MaxOp());
    if (threadIdx.x == 0) {
      float* slot = minmax + 2 * rg.c;
      if (mn < 0.0f) atomicMax(reinterpret_cast<unsigned*>(slot), kernels::float_bits(mn));
      if (mx > 0.0f) atomicMax(reinterpret_cast<int*>(slot + 1), int(kernels::float_bits(mx)));
    }
    __syncthreads();  // the temp storage is reused by the next tile
  }
}

__global__ void qparams_kernel(QParams* params, size_t channels, int qmax) {
  for (size_t c = size_t(blockIdx.x) * kThreads + threadIdx.x; c < channels;
       c += size_t(gridDim.x) * kThreads) {
    const QParams mm = params[c];  // {min_neg, max_pos} from minmax_kernel
    params[c] = qparams_from_minmax(mm.scale, mm.zero_point, qmax);
  }
}

// A bucket with a non-finite value quantizes nothing, so its residual stays
// as it was (the CPU checks the whole bucket before writing any residual).
template <bool kEf, bool kSr>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const float* x, float* r, Tiles t, const QParams* params, int qmax, RngKey key,
                    uint64_t counter_base, uint8_t* q, const uint8_t* all_finite) {
  if (*all_finite == 0) return;
  for (size_t b = blockIdx.x; b < t.blocks; b += gridDim.x) {
    const Range rg = tiles::tile_range(t, b);
    const QParams p = params[rg.c];
    for (size_t i = rg.begin + threadIdx.x; i < rg.end; i += kThreads) {
      const float v = value_at<kEf>(x, r, i);
      const uint8_t code =
          kSr ? quantize_stochastic(v, p, qmax, bits_to_unit(random_bits(key, counter_base + i)))
              : quantize_nearest(v, p, qmax);
      q[i] = code;
      if (kEf) r[i] = ef_residual(x[i], r[i], v, dequantize(code, p));
    }
  }
}

template <bool kEf>
void launch_quantize(const QuantizeArgs& a, const Tiles& t, const uint8_t* all_finite,
                     cudaStream_t s) {
  const unsigned blocks = tiles::grid_blocks(t);
  const RngKey key = rng_key(a.seed);  // whitened once here, as the CPU loop does
  if (a.stochastic)
    quantize_kernel<kEf, true><<<blocks, kThreads, 0, s>>>(a.x, a.residual, t, a.params, a.qmax,
                                                           key, a.counter_base, a.q, all_finite);
  else
    quantize_kernel<kEf, false><<<blocks, kThreads, 0, s>>>(a.x, a.residual, t, a.params, a.qmax,
                                                            key, a.counter_base, a.q, all_finite);
}

}  // namespace

cudaError_t quantize_channels_cuda(const QuantizeArgs& a, uint8_t* all_finite,
                                   cudaStream_t stream) {
  if (all_finite == nullptr || a.params == nullptr) return cudaErrorInvalidValue;
  const Tiles t = tiles::make_tiles(a.n, a.channel);
  const size_t channels = a.n == 0 ? 1 : (a.n + t.channel - 1) / t.channel;

  cudaError_t err = cudaMemsetAsync(all_finite, 1, 1, stream);
  if (err == cudaSuccess) err = cudaMemsetAsync(a.params, 0, channels * sizeof(QParams), stream);
  if (err != cudaSuccess) return err;

  float* minmax = reinterpret_cast<float*>(a.params);
  const bool ef = a.residual != nullptr;
  if (t.blocks != 0) {
    if (ef)
      minmax_kernel<true>
          <<<tiles::grid_blocks(t), kThreads, 0, stream>>>(a.x, a.residual, t, minmax, all_finite);
    else
      minmax_kernel<false>
          <<<tiles::grid_blocks(t), kThreads, 0, stream>>>(a.x, nullptr, t, minmax, all_finite);
  }
  qparams_kernel<<<tiles::stride_blocks(channels), kThreads, 0, stream>>>(a.params, channels,
                                                                          a.qmax);
  if (t.blocks != 0) {
    if (ef)
      launch_quantize<true>(a, t, all_finite, stream);
    else
      launch_quantize<false>(a, t, all_finite, stream);
  }
  return cudaGetLastError();
}

}  // namespace quantization
}  // namespace ddph
