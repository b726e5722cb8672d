#include "tests/hooks/thread_comm.h"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "core/base/dtype.h"
#include "core/base/error.h"
#include "core/base/tensor.h"
#include "core/kernels/divide.h"
#include "core/kernels/reduce.h"

namespace ddph_test {

struct ThreadGroup::Rank {
  ThreadGroup* group;
  int rank;
  ddph_comm_t table;
  std::atomic<uint64_t> bytes{0};
};

struct Collectives {
  using Rank = ThreadGroup::Rank;
  using Slot = ThreadGroup::Slot;

  static Rank& self(void* ctx) { return *static_cast<Rank*>(ctx); }

  // Runs body, turning ddph::Error into an error object of the group's host.
  template <class Body>
  static ddph_error_t* guarded(Rank& r, Body body) {
    try {
      body();
      return nullptr;
    } catch (const ddph::Error& e) {
      return r.group->host_->error_new(e.code(), e.what());
    } catch (const std::exception& e) {
      return r.group->host_->error_new(DDPH_INTERNAL, e.what());
    }
  }

  static ddph::DType check(const DLTensor* t, const char* what) {
    DDPH_CHECK(t != nullptr, DDPH_INVALID_ARGUMENT, what << " is NULL");
    DDPH_CHECK(ddph::is_flat(*t), DDPH_INVALID_ARGUMENT, what << " is not 1-D contiguous");
    ddph::DType d;
    DDPH_CHECK(ddph::dtype_from_dl(t->dtype, &d), DDPH_UNSUPPORTED, what << " dtype unsupported");
    return d;
  }

  static void meet(Rank& r) {
    DDPH_CHECK(r.group->barrier(), DDPH_TIMEOUT,
               "thread comm: rank " << r.rank << " timed out waiting for its peers");
  }

  // Posts this rank's buffer, waits for all, and checks that they agree.
  static const std::vector<Slot>& exchange(Rank& r, const void* data, int64_t numel,
                                           DLDataType dtype) {
    ThreadGroup& g = *r.group;
    g.slots_[r.rank] = Slot{data, nullptr, numel, dtype};
    meet(r);
    for (const Slot& s : g.slots_)
      DDPH_CHECK(s.numel == numel && s.dtype.code == dtype.code && s.dtype.bits == dtype.bits,
                 DDPH_COMM_FAILURE, "thread comm: ranks disagree on the tensor");
    return g.slots_;
  }

  // The reduction of all ranks' blocks, in rank order. AVG divides each
  // contribution by the world size before the sum (ddph.h's definition).
  static std::vector<uint8_t> reduce_all(const std::vector<Slot>& slots, ddph::DType d,
                                         int64_t numel, ddph_reduce_op_t op) {
    const size_t bytes = size_t(numel) * ddph::dtype_size(d);
    const int64_t world = int64_t(slots.size());
    std::vector<uint8_t> acc(bytes), term(bytes);
    if (bytes) std::memcpy(acc.data(), slots[0].data, bytes);
    if (op == DDPH_AVG) ddph::divide_inplace(d, acc.data(), size_t(numel), world);
    for (size_t i = 1; i < slots.size(); ++i) {
      const void* b = slots[i].data;
      if (op == DDPH_AVG && bytes) {
        std::memcpy(term.data(), b, bytes);
        ddph::divide_inplace(d, term.data(), size_t(numel), world);
        b = term.data();
      }
      ddph::reduce_into(op == DDPH_AVG ? DDPH_SUM : op, d, acc.data(), acc.data(), b,
                        size_t(numel));
    }
    return acc;
  }

  static int rank(void* ctx) { return self(ctx).rank; }
  static int size(void* ctx) { return self(ctx).group->world_; }

  static ddph_error_t* allreduce(void* ctx, const DLTensor* send, DLTensor* recv,
                                 ddph_reduce_op_t op, void*) {
    Rank& r = self(ctx);
    return guarded(r, [&] {
      const ddph::DType d = check(send, "allreduce send");
      check(recv, "allreduce recv");
      const int64_t n = send->shape[0];
      DDPH_CHECK(recv->shape[0] == n, DDPH_INVALID_ARGUMENT, "allreduce: recv size differs");
      std::vector<uint8_t> acc =
          reduce_all(exchange(r, ddph::data_ptr(*send), n, send->dtype), d, n, op);
      meet(r);  // every rank has read every send buffer: recv may alias send
      if (!acc.empty()) std::memcpy(ddph::data_ptr(*recv), acc.data(), acc.size());
      r.bytes += acc.size();
    });
  }

  static ddph_error_t* allgather(void* ctx, const DLTensor* send, DLTensor* recv, void*) {
    Rank& r = self(ctx);
    return guarded(r, [&] {
      const ddph::DType d = check(send, "allgather send");
      check(recv, "allgather recv");
      const int64_t n = send->shape[0];
      const int world = r.group->world_;
      DDPH_CHECK(recv->shape[0] == n * world, DDPH_INVALID_ARGUMENT, "allgather: recv size");
      const size_t block = size_t(n) * ddph::dtype_size(d);
      std::vector<uint8_t> all(block * world);
      const auto& slots = exchange(r, ddph::data_ptr(*send), n, send->dtype);
      for (int i = 0; i < world; ++i)
        if (block) std::memcpy(all.data() + i * block, slots[i].data, block);
      meet(r);
      if (!all.empty()) std::memcpy(ddph::data_ptr(*recv), all.data(), all.size());
      r.bytes += block;
    });
  }

  static ddph_error_t* reduce_scatter(void* ctx, const DLTensor* send, DLTensor* recv,
                                      ddph_reduce_op_t op, void*) {
    Rank& r = self(ctx);
    return guarded(r, [&] {
      const ddph::DType d = check(send, "reduce_scatter send");
      check(recv, "reduce_scatter recv");
      const int64_t n = recv->shape[0];
      DDPH_CHECK(send->shape[0] == n * r.group->world_, DDPH_INVALID_ARGUMENT,
                 "reduce_scatter: send size");
      std::vector<uint8_t> acc = reduce_all(
          exchange(r, ddph::data_ptr(*send), send->shape[0], send->dtype), d, send->shape[0], op);
      meet(r);
      const size_t block = size_t(n) * ddph::dtype_size(d);
      if (block) std::memcpy(ddph::data_ptr(*recv), acc.data() + r.rank * block, block);
      r.bytes += acc.size();
    });
  }

  static ddph_error_t* broadcast(void* ctx, DLTensor* buf, int root, void*) {
    Rank& r = self(ctx);
    return guarded(r, [&] {
      const ddph::DType d = check(buf, "broadcast buf");
      DDPH_CHECK(root >= 0 && root < r.group->world_, DDPH_INVALID_ARGUMENT,
                 "broadcast: root " << root << " out of range");
      const int64_t n = buf->shape[0];
      const auto& slots = exchange(r, ddph::data_ptr(*buf), n, buf->dtype);
      const size_t bytes = size_t(n) * ddph::dtype_size(d);
      if (r.rank != root && bytes) std::memcpy(ddph::data_ptr(*buf), slots[root].data, bytes);
      meet(r);  // root's buffer stays put until every rank has copied it
      if (r.rank == root) r.bytes += bytes;
    });
  }

  static ddph_error_t* barrier(void* ctx) {
    Rank& r = self(ctx);
    return guarded(r, [&] { meet(r); });
  }

  static uint64_t bytes_sent(void* ctx) { return self(ctx).bytes.load(); }
  static void destroy(void*) {}  // the group owns its ranks
};

ThreadGroup::ThreadGroup(int world, const ddph_host_t* host, std::chrono::milliseconds timeout)
    : world_(world), host_(host), timeout_(timeout), slots_(size_t(world)) {
  for (int i = 0; i < world; ++i) {
    auto r = std::make_unique<Rank>();
    r->group = this;
    r->rank = i;
    ddph_comm_t& t = r->table;
    t = ddph_comm_t{};
    t.struct_size = sizeof t;
    t.ctx = r.get();
    t.rank = &Collectives::rank;
    t.size = &Collectives::size;
    t.allreduce = &Collectives::allreduce;
    t.allgather = &Collectives::allgather;
    t.reduce_scatter = &Collectives::reduce_scatter;
    t.broadcast = &Collectives::broadcast;
    t.barrier = &Collectives::barrier;
    t.bytes_sent = &Collectives::bytes_sent;
    t.destroy = &Collectives::destroy;
    ranks_.push_back(std::move(r));
  }
}

ThreadGroup::~ThreadGroup() = default;

ddph_comm_t* ThreadGroup::comm(int rank) {
  return &ranks_.at(size_t(rank))->table;
}

void ThreadGroup::run(const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < world_; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

bool ThreadGroup::barrier() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = generation_;
  if (++arrived_ == world_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return true;
  }
  return cv_.wait_for(lock, timeout_, [&] { return generation_ != gen; });
}

}  // namespace ddph_test
