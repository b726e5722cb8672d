#include "plugins/comm_nccl/communicator.h"

#include <gloo/rendezvous/prefix_store.h>

#include <cstring>
#include <thread>
#include <vector>

#include "core/base/error.h"
#include "core/kernels/cuda/device_guard.h"
#include "plugins/comm_nccl/nccl_check.h"

namespace ddph {
namespace comm_nccl {
namespace {

constexpr char kUniqueIdKey[] = "nccl-unique-id";

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Calls return at once (ncclInProgress) and we poll with a deadline, so a
  // missing peer is a timeout, never a hang inside NCCL.
  config.blocking = 0;
  return config;
}

}  // namespace

std::unique_ptr<Communicator> Communicator::connect(const NcclConfig& config,
                                                    ::gloo::rendezvous::Store& store) {
  cuda::DeviceGuard device(config.device, "comm_nccl");
  ncclUniqueId id;
  // gloo's stores throw their own exceptions; say which step failed.
  try {
    if (config.rank == 0) {
      DDPH_NCCL(ncclGetUniqueId(&id));
      store.set(kUniqueIdKey, std::vector<char>(id.internal, id.internal + sizeof id.internal));
    } else {
      store.wait({kUniqueIdKey}, config.timeout);
      std::vector<char> bytes = store.get(kUniqueIdKey);
      DDPH_CHECK(bytes.size() == sizeof id.internal, DDPH_COMM_FAILURE,
                 "comm_nccl: the unique id in the store has " << bytes.size() << " bytes, expected "
                                                              << sizeof id.internal);
      std::memcpy(id.internal, bytes.data(), sizeof id.internal);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string text = e.what();
    const bool timed_out = text.find("imeout") != std::string::npos;
    DDPH_FAIL(timed_out ? DDPH_TIMEOUT : DDPH_COMM_FAILURE,
              "comm_nccl rank " << config.rank << ": exchanging the NCCL unique id through the "
                                << "rendezvous store failed: " << text);
  }
  ncclComm_t comm = nullptr;
  ncclConfig_t nccl_config = nonblocking_config();
  DDPH_NCCL(ncclCommInitRankConfig(&comm, config.world, id, config.rank, &nccl_config));
  std::unique_ptr<Communicator> made = adopt(config, comm);
  made->comm_->wait_ready("ncclCommInitRankConfig (waiting for every rank to join)",
                          made->deadline());
  return made;
}

std::unique_ptr<Communicator> Communicator::adopt(const NcclConfig& config, ncclComm_t comm) {
  try {
    return std::unique_ptr<Communicator>(new Communicator(config, comm));
  } catch (...) {
    ncclCommAbort(comm);  // still initializing: nothing else owns it yet
    throw;
  }
}

Communicator::Communicator(const NcclConfig& config, ncclComm_t comm)
    : config_(config), comm_(std::make_shared<GuardedComm>(comm)) {
  DDPH_CUDA(cudaStreamCreateWithFlags(&staging_, cudaStreamNonBlocking));
  watchdog_ = std::make_unique<Watchdog>(comm_, config_.device, config_.timeout);
}

Communicator::~Communicator() {
  try {
    cuda::DeviceGuard device(config_.device, "comm_nccl");
    watchdog_.reset();  // no abort can race the teardown below
    if (ncclComm_t c = comm_->release()) {
      // Finalize flushes what is still enqueued; if that cannot finish in
      // time, abort rather than hang the host's teardown. A failed
      // Finalize aborts too: NCCL's threads and memory must not outlive
      // the communicator.
      GuardedComm finishing(c);
      try {
        const bool pending = nccl_check(ncclCommFinalize(c), "ncclCommFinalize");
        if (pending) finishing.wait_ready("ncclCommFinalize", deadline());
        if (ncclComm_t still = finishing.release()) ncclCommDestroy(still);
      } catch (...) {
        if (ncclComm_t still = finishing.release()) ncclCommAbort(still);
      }
    }
    if (staging_ != nullptr) cudaStreamDestroy(staging_);
  } catch (...) {
    // Teardown never throws; an aborted communicator is already freed.
  }
}

std::chrono::steady_clock::time_point Communicator::deadline() const {
  return std::chrono::steady_clock::now() + config_.timeout;
}

void Communicator::wait_staging(const char* what) {
  const auto until = deadline();
  for (;;) {
    const cudaError_t state = cudaStreamQuery(staging_);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) DDPH_CUDA(state);
    // Let an asynchronous NCCL error end the wait early.
    comm_->wait_ready(what, until);
    if (std::chrono::steady_clock::now() > until) {
      const std::string why = std::string(what) + " did not complete within " +
                              std::to_string(config_.timeout.count()) + " ms";
      comm_->abort(DDPH_TIMEOUT, why);
      DDPH_FAIL(DDPH_TIMEOUT, "comm_nccl " << why);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::unique_ptr<CommBackend> Communicator::split(int color, int key) {
  cuda::DeviceGuard device(config_.device, "comm_nccl");
  ncclComm_t child = nullptr;
  ncclConfig_t nccl_config = nonblocking_config();
  const int nccl_color = color < 0 ? NCCL_SPLIT_NOCOLOR : color;
  comm_->with("split", [&](ncclComm_t c) {
    return DDPH_NCCL(ncclCommSplit(c, nccl_color, key, &child, &nccl_config));
  });
  comm_->wait_ready("ncclCommSplit", deadline());
  if (child == nullptr) return nullptr;
  // The child's own size and rank, as NCCL ordered it (by key, then rank).
  NcclConfig sub = config_;
  std::unique_ptr<Communicator> made = adopt(sub, child);
  made->comm_->wait_ready("ncclCommSplit (child)", deadline());
  made->comm_->with("split", [&](ncclComm_t c) {
    DDPH_NCCL(ncclCommCount(c, &made->config_.world));
    return DDPH_NCCL(ncclCommUserRank(c, &made->config_.rank));
  });
  return made;
}

}  // namespace comm_nccl
}  // namespace ddph
