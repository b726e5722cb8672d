// Every hook with a CUDA path, on GPU buckets, over Gloo (which stages CUDA
// buffers through host memory: core/comm/host_staging.h), against the same
// hook on the same values in host buckets: W real processes sharing one GPU,
// three steps each. The GPU path must give the CPU path's bits, and every
// rank must end with the same bits. Without a GPU the test skips with one
// line. Hooks whose CUDA path lives in another family's tests (quantization,
// powersgd, optimizer_overlap...) add a row here when that path exists.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/support/cuda_device.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

struct Case {
  const char* name;
  const char* hook;  // a YAML flow map
  int world;
  bool averages = true;  // noop leaves each rank its own values
};

// `hierarchical` with local_size 2 at world 4 is two simulated machines.
const Case kCases[] = {
    {"allreduce", "{family: default, name: allreduce}", 3},
    {"fp16_compress", "{family: default, name: fp16_compress}", 2},
    {"bf16_compress", "{family: default, name: bf16_compress}", 3},
    {"fp16_wrapper",
     "{family: default, name: fp16_wrapper, wrap: {family: default, name: allreduce}}", 2},
    {"noop", "{family: debugging, name: noop}", 2, false},
    {"hierarchical over fp16_compress",
     "{family: hierarchical, name: hierarchical, options: {local_size: 2}, "
     "wrap: {family: default, name: fp16_compress}}",
     4},
};

std::string yaml(const char* hook) {
  return std::string("comm: {backend: gloo, timeout: 60s}\nhook: ") + hook + "\n";
}

// Different per rank and step, finite, and wide enough in magnitude that
// the 16-bit casts round.
std::vector<float> values(int rank, uint64_t step, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t h = uint32_t(i) * 2654435761u + uint32_t(rank) * 40503u + uint32_t(step) * 97u;
    v[i] = (float((h >> 8) % 20001) - 10000.0f) / 777.0f;
  }
  return v;
}

int body(const Case& c, int rank, int world, const std::string& dir) {
  DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "rank %d: cudaSetDevice", rank);
  cudaStream_t stream = nullptr;
  DDPH_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
                   "rank %d: cudaStreamCreate", rank);
  std::string error;
  ddph_session_t* gpu = ddph_test::open_session(yaml(c.hook), rank, world, dir, &error);
  DDPH_CHILD_CHECK(gpu != nullptr, "%s rank %d: %s", c.name, rank, error.c_str());
  ddph_session_t* cpu = ddph_test::open_session(yaml(c.hook), rank, world, dir, &error);
  DDPH_CHILD_CHECK(cpu != nullptr, "%s rank %d: %s", c.name, rank, error.c_str());
  const size_t n = 100003;  // odd: ragged ends everywhere
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<float> host = values(rank, step, n);
    ddph_test::DeviceVec<float> device(host);
    ddph_test::FloatBucket hb(host, 0, step, true);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(cpu, hb) == DDPH_OK, "%s rank %d step %d: host bucket",
                     c.name, rank, int(step));
    std::string message;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(gpu, ddph_test::on_gpu(hb.bucket, device.get(), stream),
                                           &message) == DDPH_OK,
                     "%s rank %d step %d: GPU bucket: %s", c.name, rank, int(step),
                     message.c_str());
    const std::vector<float> back = device.host(stream);
    const std::string differ = ddph_test::bit_difference(back, host);
    DDPH_CHILD_CHECK(differ.empty(), "%s rank %d step %d: %s", c.name, rank, int(step),
                     differ.c_str());
    if (c.averages)
      DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(cpu, back.data(), n * sizeof(float)),
                       "%s step %d: ranks differ", c.name, int(step));
  }
  ddph_session_close(gpu);
  ddph_session_close(cpu);
  cudaStreamDestroy(stream);
  return 0;
}

TEST(HooksOnCudaOverGloo, GpuBucketsGiveTheCpuPathsBitsOnEveryRank) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  for (const Case& c : kCases) {
    const auto results = ddph_test::run_ranks(
        c.world,
        [&](int rank, int world, const std::string& dir) { return body(c, rank, world, dir); },
        240);
    EXPECT_TRUE(ddph_test::all_passed(results)) << c.name << ": " << ddph_test::describe(results);
  }
}

// A host allocator (ABI 1.3) over cudaMallocAsync, counting its calls.
struct CountingCudaAllocator {
  ddph_device_allocator_t table{};
  int allocs = 0, frees = 0, failures = 0;
  CountingCudaAllocator() {
    table.struct_size = sizeof table;
    table.ctx = this;
    table.alloc = [](void* ctx, size_t bytes, DLDevice, void* stream) -> void* {
      auto* a = static_cast<CountingCudaAllocator*>(ctx);
      void* p = nullptr;
      if (cudaMallocAsync(&p, bytes, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
        a->failures++;
        return nullptr;
      }
      a->allocs++;
      return p;
    };
    table.free = [](void* ctx, void* p, DLDevice, void* stream) {
      auto* a = static_cast<CountingCudaAllocator*>(ctx);
      if (cudaFreeAsync(p, static_cast<cudaStream_t>(stream)) != cudaSuccess) a->failures++;
      a->frees++;
    };
  }
};

// fp16_compress casts into scratch on the GPU: with the host's allocator in
// the session options, that scratch comes from it, all of it comes back,
// and the bits do not change.
int allocator_body(int rank, int world, const std::string& dir) {
  DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "rank %d: cudaSetDevice", rank);
  cudaStream_t stream = nullptr;
  DDPH_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
                   "rank %d: cudaStreamCreate", rank);
  CountingCudaAllocator counting;
  const std::string text = yaml("{family: default, name: fp16_compress}");
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = text.c_str();
  o.rank = rank;
  o.world_size = world;
  const std::string url = "file://" + dir + "/allocator";
  o.rendezvous = url.c_str();
  o.device_allocator = &counting.table;
  ddph_session_t* gpu = nullptr;
  ddph_error_t* e = ddph_session_open(&o, &gpu);
  DDPH_CHILD_CHECK(e == nullptr, "rank %d: open: %s", rank, ddph_error_message(e));
  std::string error;
  ddph_session_t* cpu = ddph_test::open_session(text, rank, world, dir, &error);
  DDPH_CHILD_CHECK(cpu != nullptr, "rank %d: %s", rank, error.c_str());
  const size_t n = 4099;
  std::vector<float> host = values(rank, 0, n);
  ddph_test::DeviceVec<float> device(host);
  ddph_test::FloatBucket hb(host, 0, 0, true);
  DDPH_CHILD_CHECK(ddph_test::run_bucket(cpu, hb) == DDPH_OK, "rank %d: host bucket", rank);
  std::string message;
  DDPH_CHILD_CHECK(ddph_test::run_bucket(gpu, ddph_test::on_gpu(hb.bucket, device.get(), stream),
                                         &message) == DDPH_OK,
                   "rank %d: GPU bucket: %s", rank, message.c_str());
  const std::string differ = ddph_test::bit_difference(device.host(stream), host);
  DDPH_CHILD_CHECK(differ.empty(), "rank %d: %s", rank, differ.c_str());
  ddph_session_close(gpu);
  ddph_session_close(cpu);
  DDPH_CHILD_CHECK(counting.allocs > 0, "rank %d: the host's allocator was never asked", rank);
  DDPH_CHILD_CHECK(counting.frees == counting.allocs && counting.failures == 0,
                   "rank %d: %d allocs, %d frees, %d failures", rank, counting.allocs,
                   counting.frees, counting.failures);
  cudaStreamDestroy(stream);
  return 0;
}

TEST(HooksOnCudaOverGloo, ScratchComesFromTheHostsAllocatorWhenItLendsOne) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  const auto results = ddph_test::run_ranks(2, allocator_body, 240);
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

}  // namespace
