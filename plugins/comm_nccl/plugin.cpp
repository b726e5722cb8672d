// libddph_comm_nccl.so: the GPU communicator (NCCL from the CUDA toolkit).
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>

#include "core/base/error.h"
#include "core/base/options.h"
#include "core/comm/comm_plugin.h"
#include "core/comm/rendezvous/gloo/gloo_store.h"
#include "plugins/comm_nccl/communicator.h"
#include "plugins/comm_nccl/nccl_check.h"

namespace ddph {
namespace comm_nccl {
namespace {

// The device a rank uses when the YAML does not name one: the launcher's
// local rank where it gives one, as PyTorch scripts do.
int pick_device(int64_t option, int rank) {
  int count = 0;
  DDPH_CUDA(cudaGetDeviceCount(&count));
  DDPH_CHECK(count > 0, DDPH_UNSUPPORTED, "comm_nccl: no CUDA device is visible");
  int device = int(option);
  if (device < 0) {
    const char* local = std::getenv("LOCAL_RANK");
    if (local == nullptr) local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    device = local != nullptr ? std::atoi(local) % count : rank % count;
  }
  DDPH_CHECK(device < count, DDPH_INVALID_ARGUMENT,
             "comm_nccl: option device " << device << " is not below the " << count
                                         << " visible CUDA devices");
  return device;
}

}  // namespace

struct NcclPlugin {
  static constexpr CommPluginInfo kInfo{
      "comm_nccl", "nccl",
      "NCCL on CUDA tensors (enqueued on the bucket's stream); host tensors are staged through "
      "the GPU; rendezvous via file://, redis://, tcp://, env:// or the host's store",
      Rendezvous::kRequired};
  static inline const ddph_option_spec_t kOptions[] = {
      spec_int("device", "-1",
               "CUDA device of this rank; -1 takes LOCAL_RANK (torchrun), then "
               "OMPI_COMM_WORLD_LOCAL_RANK (mpirun), then rank modulo the device count",
               -1, 1023),
  };

  static std::unique_ptr<CommBackend> connect(const ddph_comm_init_t& init) {
    Options options(init.options, init.num_options);
    NcclConfig config;
    set_place(config, init);
    config.device = pick_device(init.num_options > 0 ? options.get_int("device") : -1, init.rank);
    rendezvous::GlooStore scoped(rendezvous::open_init_store(init),
                                 init.prefix != nullptr ? init.prefix : "", config.timeout);
    return Communicator::connect(config, scoped);
  }
};

}  // namespace comm_nccl
}  // namespace ddph

DDPH_DEFINE_COMM_PLUGIN(::ddph::comm_nccl::NcclPlugin)
