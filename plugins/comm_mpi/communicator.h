// One rank's MPI communicator: a private MPI communicator (a dup of
// MPI_COMM_WORLD, or a split of one) so that ddphooks' traffic never mixes
// with the host's, driven by nonblocking calls so that every operation
// respects the timeout.
//
// Timeouts: MPI cannot cancel a collective. When a wait runs past the
// timeout the operation is abandoned, still posted, and the communicator is
// broken: every later call fails fast with DDPH_COMM_FAILURE. MPI may still
// touch the operation's buffers if the missing peer shows up later. With
// staging on (the default), they are this communicator's own buffers, never
// the caller's, and an abandoned one is leaked rather than freed; with
// staging off MPI works on the caller's buffers, two copies fewer per call,
// and after a timeout the caller must keep them alive.
#pragma once

#include <ddph/ddph.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/args.h"
#include "core/comm/backend.h"
#include "core/comm/call_agreement.h"
#include "plugins/comm_mpi/mpi_count.h"

namespace ddph {
namespace comm_mpi {

// A growable byte buffer that a timed-out operation can abandon.
class Staging {
 public:
  char* get(size_t bytes);  // at least `bytes`, contents undefined
  void abandon();           // leaks the memory: MPI may still write into it

 private:
  std::unique_ptr<std::vector<char>> mem_ = std::make_unique<std::vector<char>>();
};

class Communicator : public CommBackend {
 public:
  // Takes ownership of comm (made by MPI_Comm_idup or MPI_Comm_split) and
  // sets MPI_ERRORS_RETURN on it. Split communicators share their parent's
  // byte count, so a session's wire bytes include its subgroups' traffic.
  Communicator(
      MPI_Comm comm, std::chrono::milliseconds timeout, bool staging,
      std::shared_ptr<std::atomic<uint64_t>> bytes = std::make_shared<std::atomic<uint64_t>>(0));
  ~Communicator() override;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // Collectives of ddph_comm_t; [serialized] per communicator.
  // Host memory only: `stream` is ignored.
  // send copies buf, posts it and returns: a blocking send would deadlock a
  // ring where every rank sends first. Collectives release the sends that
  // have completed; destroy waits (within the timeout) for the rest.
  // split is collective: MPI_Comm_split of the ranks that pass the same
  // color, ordered by (key, rank); NULL for a negative color (MPI_UNDEFINED).
  DDPH_COMM_BACKEND_COLLECTIVES;

  // Payload bytes this rank sent, counted per call by the algorithm-level
  // model in docs/mpi.md (MPI does not say what it put on the wire).
  // [thread-safe]
  bool counts_bytes() const override { return true; }
  uint64_t bytes_sent() override { return bytes_->load(std::memory_order_relaxed); }

 private:
  static constexpr CommReach kReach{"MPI", CommMemory::kHost};

  // send's and recv's checks, before anything is posted.
  CommBuf check_p2p(const DLTensor* buf, int peer, const char* what);
  // Waits for req within the timeout. On timeout or an MPI error the
  // communicator breaks; on timeout the given staging buffers are abandoned.
  // status, when given, receives the completed operation's status.
  void wait(MPI_Request* req, const char* what, std::initializer_list<Staging*> staging,
            MPI_Status* status = nullptr);
  // Returns once every rank has made this call (call_agreement.h); throws
  // DDPH_COMM_FAILURE, naming the calls, where ranks differ. All ranks then
  // skip the call, so the communicator stays usable. alltoallv passes its
  // counts.
  void agree(const CallShape& shape, const char* what, const int64_t* send_counts = nullptr,
             const int64_t* recv_counts = nullptr);
  // Throws DDPH_COMM_FAILURE if the communicator is broken.
  void check_not_broken(const char* what);
  void break_with(const std::string& reason);
  // MPICHECK with this communicator's context; breaks it on failure.
  void check(int rc, const char* call, const char* what);
  // Waits (within the timeout) for every posted send; reports a failed one.
  void drain_sends(const char* what);
  // Releases the posted sends that have completed, without waiting. Not a
  // drain: a peer may post its recv only after the collective this rank is
  // about to enter, so waiting here could deadlock.
  void reap_sends(const char* what);
  void count(uint64_t bytes) { bytes_->fetch_add(bytes, std::memory_order_relaxed); }
  std::string where(const char* what) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_;
  bool staging_;  // MPI works on send_stage_/recv_stage_, not the caller's buffers
  std::shared_ptr<std::atomic<uint64_t>> bytes_;
  Staging send_stage_, recv_stage_;
  Staging agree_stage_;  // agree()'s words: a timed-out check abandons them too

  std::mutex broken_mutex_;
  std::string broken_;  // the first failure; empty while healthy

  struct PendingSend {
    Staging data;
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = 0;
  };
  std::deque<std::unique_ptr<PendingSend>> pending_sends_;
};

}  // namespace comm_mpi
}  // namespace ddph
