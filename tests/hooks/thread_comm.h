// An in-process communicator: N threads, one ddph_comm_t per thread, sharing
// one group. Collectives meet at a barrier and every rank reduces all
// contributions itself in rank order with ddph::reduce_into, so the result
// is deterministic and identical on every rank. Lets hook tests run 2 or 3
// ranks inside one test process; real Gloo is tested elsewhere.
#pragma once

#include <ddph/ddph.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace ddph_test {

class ThreadGroup {
 public:
  // host makes the errors the collectives return. A collective that waits
  // longer than timeout for its peers fails with DDPH_TIMEOUT.
  ThreadGroup(int world, const ddph_host_t* host,
              std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;

  int world() const { return world_; }
  // Borrowed; valid while the group lives. Use from rank's thread only.
  ddph_comm_t* comm(int rank);
  // Runs body(rank) on one new thread per rank and joins them all.
  void run(const std::function<void(int rank)>& body);

  struct Rank;  // per-rank context behind ddph_comm_t::ctx

 private:
  friend struct Collectives;
  struct Slot {
    const void* data = nullptr;
    void* out = nullptr;
    int64_t numel = 0;
    DLDataType dtype{};
  };
  // Waits for all ranks; false on timeout.
  bool barrier();

  int world_;
  const ddph_host_t* host_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace ddph_test
