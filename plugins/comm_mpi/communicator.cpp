#include "plugins/comm_mpi/communicator.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <thread>

#include "core/base/error.h"
#include "core/base/host.h"
#include "plugins/comm_mpi/mpi_check.h"
#include "plugins/comm_mpi/mpi_runtime.h"

namespace ddph {
namespace comm_mpi {

char* Staging::get(size_t bytes) {
  if (mem_->size() < bytes) mem_->resize(bytes);
  return mem_->data();
}

void Staging::abandon() {
  // Never freed: the abandoned operation may still write here. Kept in a
  // list that lives until exit, so leak checkers see it as still reachable.
  static std::mutex mutex;
  static auto* graveyard = new std::vector<std::unique_ptr<std::vector<char>>>();
  std::lock_guard<std::mutex> lock(mutex);
  graveyard->push_back(std::move(mem_));
  mem_ = std::make_unique<std::vector<char>>();
}

Communicator::Communicator(MPI_Comm comm, std::chrono::milliseconds timeout, bool staging,
                           std::shared_ptr<std::atomic<uint64_t>> bytes)
    : comm_(comm), timeout_(timeout), staging_(staging), bytes_(std::move(bytes)) {
  MPICHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "comm_mpi: new communicator");
  MPICHECK(MPI_Comm_rank(comm_, &rank_), "comm_mpi: new communicator");
  MPICHECK(MPI_Comm_size(comm_, &size_), "comm_mpi: new communicator");
}

Communicator::~Communicator() {
  bool healthy;
  {
    std::lock_guard<std::mutex> lock(broken_mutex_);
    healthy = broken_.empty();
  }
  try {
    // Posted sends must complete before the buffers and the communicator go.
    if (healthy) drain_sends("destroy");
  } catch (...) {
    // destroy cannot report; the peer's recv fails instead.
  }
  std::lock_guard<std::mutex> lock(broken_mutex_);
  if (!broken_.empty()) {
    // Operations are still posted on it: leave the communicator and the
    // staging of unfinished sends to MPI rather than free them under it.
    for (auto& s : pending_sends_) s->data.abandon();
    return;
  }
  if (comm_ != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm_);
}

std::string Communicator::where(const char* what) const {
  std::ostringstream os;
  os << what << " on rank " << rank_ << " of " << size_;
  return os.str();
}

void Communicator::check_not_broken(const char* what) {
  // MPI calls after MPI_Finalize are erroneous (Open MPI aborts the process).
  DDPH_CHECK(!mpi_finalized(), DDPH_COMM_FAILURE,
             where(what) << ": MPI has been finalized; close ddphooks sessions before "
                            "MPI_Finalize");
  std::lock_guard<std::mutex> lock(broken_mutex_);
  DDPH_CHECK(broken_.empty(), DDPH_COMM_FAILURE,
             where(what) << ": communicator is broken since " << broken_);
}

void Communicator::break_with(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(broken_mutex_);
    if (!broken_.empty()) return;
    broken_ = reason;
  }
  log(DDPH_LOG_ERROR, "comm_mpi", "communicator broken: " + reason);
}

void Communicator::check(int rc, const char* call, const char* what) {
  if (rc == MPI_SUCCESS) return;
  try {
    throw_mpi_error(rc, call, where(what));
  } catch (const Error& e) {
    break_with(std::string(code_name(e.code())) + ": " + e.what());
    throw;
  }
}

void Communicator::wait(MPI_Request* req, const char* what, std::initializer_list<Staging*> staging,
                        MPI_Status* status) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + timeout_;
  // MPI makes progress only inside MPI calls (no progress thread), so poll
  // hard at first; back off once the wait is clearly a long one, so that a
  // rank waiting for a slow peer leaves the CPU to it.
  for (uint64_t polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(req, &done, status != nullptr ? status : MPI_STATUS_IGNORE), "MPI_Test", what);
    if (done) return;
    if (polls % 64 != 63) continue;
    const auto now = clock::now();
    if (now >= deadline) {
      for (Staging* s : staging) s->abandon();
      std::ostringstream os;
      os << where(what) << ": timed out after " << timeout_.count() << " ms waiting for the "
         << size_ << " ranks of this MPI communicator (a peer is missing, dead or in another "
         << "collective); MPI cannot cancel it, so this communicator is unusable from now on";
      break_with(std::string("DDPH_TIMEOUT: ") + os.str());
      throw Error(DDPH_TIMEOUT, os.str());
    }
    if (now - start > std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    else if (now - start > std::chrono::milliseconds(1))
      sched_yield();
  }
}

void Communicator::agree(const CallShape& shape, const char* what, const int64_t* send_counts,
                         const int64_t* recv_counts) {
  const AgreementTerms mine = agreement_terms(shape, rank_, size_, send_counts, recv_counts);
  // In the staging buffer, never on the stack: after a timeout MPI may
  // still read and write these words.
  const size_t shapes_bytes = size_t(size_) * sizeof(CallShape);
  char* words = agree_stage_.get(std::max(2 * sizeof(AgreementTerms), sizeof shape + shapes_bytes));
  std::memcpy(words, &mine, sizeof mine);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(words, words + sizeof mine, kTermWords, MPI_UINT64_T, MPI_SUM, comm_, &req),
        "MPI_Iallreduce", what);
  wait(&req, what, {&agree_stage_});
  AgreementTerms sum;
  std::memcpy(&sum, words + sizeof mine, sizeof sum);
  if (all_agree(mine, sum, size_)) return;
  // Every rank sees the same sums, so all of them are here, gathering.
  std::memcpy(words, &shape, sizeof shape);
  char* gathered = words + sizeof shape;
  check(MPI_Iallgather(words, kShapeWords, MPI_INT64_T, gathered, kShapeWords, MPI_INT64_T, comm_,
                       &req),
        "MPI_Iallgather", what);
  wait(&req, what, {&agree_stage_});
  std::vector<CallShape> shapes(static_cast<size_t>(size_));
  std::memcpy(shapes.data(), gathered, shapes_bytes);
  throw Error(DDPH_COMM_FAILURE, where(what) + ": " + describe_disagreement(shapes, rank_));
}

void Communicator::drain_sends(const char* what) {
  while (!pending_sends_.empty()) {
    PendingSend& s = *pending_sends_.front();
    check_not_broken(what);
    wait(&s.request, what, {&s.data});
    pending_sends_.pop_front();
  }
}

void Communicator::reap_sends(const char* what) {
  for (auto it = pending_sends_.begin(); it != pending_sends_.end();) {
    int done = 0;
    check(MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE), "MPI_Test", what);
    it = done ? pending_sends_.erase(it) : it + 1;
  }
}

}  // namespace comm_mpi
}  // namespace ddph
