// Google Benchmark timings of the CUDA kernels on a 25 MB fp32 bucket, beside
// a device-to-device cudaMemcpy of the same bytes in the same binary, for
// issue 6's "kernel GB/s against the device's memory bandwidth". Not a test:
// run build/bin/ddph_bench_gpu_kernels where a GPU exists (docs/cuda.md).
// Each iteration is timed with CUDA events on one stream (manual time), so
// the figures are the GPU's, not the launch overhead's. Bytes/s counts the
// bytes each kernel must read and write at the least: the ratio to memcpy's
// (which reads and writes the bucket once) is the share of bandwidth used.
// Without a GPU every benchmark stops at once with CUDA's reason.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/kernels/cuda/elementwise_cuda.h"
#include "core/quant/kernels/quant_cuda.h"

namespace {

namespace q = ddph::quantization;

constexpr size_t kBytes = 25u << 20;
constexpr size_t kFloats = kBytes / 4;
constexpr size_t kChannel = 512;

// Device memory for one benchmark, freed at the end.
struct Device {
  explicit Device(size_t bytes) { ok = cudaMalloc(&p, bytes) == cudaSuccess; }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  void* p = nullptr;
  bool ok = false;
};

// Times body() with events on a stream of its own; stops the benchmark with
// CUDA's reason on any failure (no GPU included).
// Whether a GPU is there; if not, stops the benchmark with CUDA's reason.
bool gpu_present(benchmark::State& st) {
  int count = 0;
  const cudaError_t probe = cudaGetDeviceCount(&count);
  if (probe == cudaSuccess && count > 0) return true;
  st.SkipWithError(
      ("no CUDA device: " + std::string(probe != cudaSuccess ? cudaGetErrorString(probe)
                                                             : "cudaGetDeviceCount found none"))
          .c_str());
  return false;
}

// Times body() with events on a stream of its own; stops the benchmark with
// CUDA's reason on any failure.
template <class Body>
void timed(benchmark::State& st, int64_t bytes_per_iteration, Body body) {
  cudaStream_t s = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    st.SkipWithError("cannot create a CUDA stream or events");
    return;
  }
  if (body(s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) {  // warm-up
    st.SkipWithError("the kernel failed");
  } else {
    for (auto _ : st) {
      cudaEventRecord(start, s);
      const cudaError_t e = body(s);
      cudaEventRecord(stop, s);
      float ms = 0;
      if (e != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
          cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
        st.SkipWithError(cudaGetErrorString(e != cudaSuccess ? e : cudaGetLastError()));
        break;
      }
      st.SetIterationTime(double(ms) / 1e3);
    }
    st.SetBytesProcessed(int64_t(st.iterations()) * bytes_per_iteration);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(s);
}

// A bucket of small varied floats, on the device.
bool fill(void* dst) {
  std::vector<float> v(kFloats);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i)) * 1e-2f;
  return cudaMemcpy(dst, v.data(), kBytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

void BM_CudaMemcpy(benchmark::State& st) {
  if (!gpu_present(st)) return;
  Device src(kBytes), dst(kBytes);
  timed(st, int64_t(kBytes), [&](cudaStream_t s) {
    return cudaMemcpyAsync(dst.p, src.p, kBytes, cudaMemcpyDeviceToDevice, s);
  });
}

// range(0): bits; range(1): 1 for error feedback. Reads the bucket (and the
// residual), writes 1-byte codes (and the residual).
void BM_CudaQuantizePerChannel(benchmark::State& st) {
  if (!gpu_present(st)) return;
  const int bits = int(st.range(0));
  const bool ef = st.range(1) != 0;
  Device x(kBytes), residual(kBytes), codes(kFloats), flag(1),
      params(q::num_channels(kFloats, kChannel) * sizeof(q::QParams));
  if (!x.ok || !fill(x.p) || cudaMemset(residual.p, 0, kBytes) != cudaSuccess) {
    st.SkipWithError("cannot set up device memory");
    return;
  }
  q::QuantizeArgs a;
  a.x = static_cast<const float*>(x.p);
  a.n = kFloats;
  a.channel = kChannel;
  a.qmax = (1 << bits) - 1;
  a.residual = ef ? static_cast<float*>(residual.p) : nullptr;
  a.params = static_cast<q::QParams*>(params.p);
  a.q = static_cast<uint8_t*>(codes.p);
  const int64_t bytes = int64_t(kBytes) * (ef ? 3 : 1) + int64_t(kFloats);
  timed(st, bytes, [&](cudaStream_t s) {
    return q::quantize_channels_cuda(a, static_cast<uint8_t*>(flag.p), s);
  });
}

// Reads 1-byte codes, writes the fp32 bucket.
void BM_CudaDequantizeInto(benchmark::State& st) {
  if (!gpu_present(st)) return;
  Device codes(kFloats), out(kBytes),
      params(q::num_channels(kFloats, kChannel) * sizeof(q::QParams));
  std::vector<q::QParams> p(q::num_channels(kFloats, kChannel), q::QParams{1e-4f, 128.0f});
  if (cudaMemset(codes.p, 7, kFloats) != cudaSuccess ||
      cudaMemcpy(params.p, p.data(), p.size() * sizeof(q::QParams), cudaMemcpyHostToDevice) !=
          cudaSuccess) {
    st.SkipWithError("cannot set up device memory");
    return;
  }
  timed(st, int64_t(kBytes + kFloats), [&](cudaStream_t s) {
    return q::dequantize_into_cuda(static_cast<const uint8_t*>(codes.p), kFloats, kChannel,
                                   static_cast<const q::QParams*>(params.p),
                                   static_cast<float*>(out.p), s);
  });
}

// fp16_compress's cast: reads fp32, writes fp16 divided by the world size.
void BM_CudaCastDivToHalf(benchmark::State& st) {
  if (!gpu_present(st)) return;
  Device x(kBytes), low(kBytes / 2);
  if (!x.ok || !fill(x.p)) {
    st.SkipWithError("cannot set up device memory");
    return;
  }
  timed(st, int64_t(kBytes + kBytes / 2), [&](cudaStream_t s) {
    return ddph::cuda::cast_div_into(ddph::DType::F32, x.p, ddph::DType::F16,
                                     static_cast<uint16_t*>(low.p), kFloats, 4, s);
  });
}

BENCHMARK(BM_CudaMemcpy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaQuantizePerChannel)
    ->ArgNames({"bits", "ef"})
    ->Args({8, 0})
    ->Args({4, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaDequantizeInto)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaCastDivToHalf)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
