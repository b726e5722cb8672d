#include "plugins/comm_mpi/nbc_tuning.h"

#include <mpi.h>

#include <mutex>

#include "plugins/comm_mpi/mpi_runtime.h"

namespace ddph {
namespace comm_mpi {
namespace {

constexpr size_t kRingMinBytes = 64 * 1024;  // libnbc's own large-buffer threshold
constexpr int kAuto = 0, kRing = 1;          // the variable's "ignore" and "ring"

// The variable's handle, or nullptr where there is none.
MPI_T_cvar_handle* handle() {
  static std::once_flag once;
  static MPI_T_cvar_handle h;
  static bool ok = false;
  std::call_once(once, [] {
    int provided = 0, index = 0, count = 0;
    if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) return;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &h, &count) != MPI_SUCCESS || count != 1) return;
    int value = -1;
    // Only the automatic choice is replaced: a user's own stays.
    ok = MPI_T_cvar_read(h, &value) == MPI_SUCCESS && value == kAuto;
  });
  return ok ? &h : nullptr;
}

}  // namespace

RingHint::RingHint(size_t bytes) {
  if (bytes < kRingMinBytes || host_may_call_mpi_concurrently()) return;
  MPI_T_cvar_handle* h = handle();
  int ring = kRing;
  set_ = h != nullptr && MPI_T_cvar_write(*h, &ring) == MPI_SUCCESS;
}

RingHint::~RingHint() {
  if (!set_) return;
  int automatic = kAuto;
  MPI_T_cvar_write(*handle(), &automatic);
}

}  // namespace comm_mpi
}  // namespace ddph
