#include "loader/session/checked_comm.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/error.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {
namespace loader {
namespace {

// A call's shape from its tensor: -1 where there is none or it is unknown
// (the inner communicator then reports the bad argument itself).
CallShape shape_of(CallKind kind, const DLTensor* t, int64_t op, int64_t root) {
  CallShape s;
  s.kind = int64_t(kind);
  s.op = op;
  s.root = root;
  if (t != nullptr) {
    DType dt;
    if (dtype_from_dl(t->dtype, &dt)) s.dtype = int64_t(dt);
    if (t->ndim >= 0 && (t->ndim == 0 || t->shape != nullptr)) s.numel = numel(*t);
  }
  return s;
}

}  // namespace

void StrictCalls::set_bucket(const BucketFingerprint& fp) {
  std::lock_guard<std::mutex> lock(mu_);
  bucket_ = fp;
}

BucketFingerprint StrictCalls::bucket() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bucket_;
}

void StrictCalls::set_out_of_step() {
  std::lock_guard<std::mutex> lock(mu_);
  out_of_step_ = true;
}

bool StrictCalls::out_of_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_of_step_;
}

// The table's functions: each checks the call, then forwards it.
struct CheckedComm::Calls {
  static CheckedComm* self(void* ctx) { return static_cast<CheckedComm*>(ctx); }
  static ddph_comm_t* inner(void* ctx) { return self(ctx)->inner_; }

  static int rank(void* ctx) { return inner(ctx)->rank(inner(ctx)->ctx); }
  static int size(void* ctx) { return inner(ctx)->size(inner(ctx)->ctx); }

  static ddph_error_t* allreduce(void* ctx, const DLTensor* send, DLTensor* recv,
                                 ddph_reduce_op_t op, void* stream) {
    if (ddph_error_t* e =
            guard([&] { self(ctx)->agree(shape_of(CallKind::kAllreduce, send, op, -1)); }))
      return e;
    return inner(ctx)->allreduce(inner(ctx)->ctx, send, recv, op, stream);
  }
  static ddph_error_t* allgather(void* ctx, const DLTensor* send, DLTensor* recv, void* stream) {
    if (ddph_error_t* e =
            guard([&] { self(ctx)->agree(shape_of(CallKind::kAllgather, send, -1, -1)); }))
      return e;
    return inner(ctx)->allgather(inner(ctx)->ctx, send, recv, stream);
  }
  static ddph_error_t* reduce_scatter(void* ctx, const DLTensor* send, DLTensor* recv,
                                      ddph_reduce_op_t op, void* stream) {
    if (ddph_error_t* e =
            guard([&] { self(ctx)->agree(shape_of(CallKind::kReduceScatter, recv, op, -1)); }))
      return e;
    return inner(ctx)->reduce_scatter(inner(ctx)->ctx, send, recv, op, stream);
  }
  static ddph_error_t* broadcast(void* ctx, DLTensor* buf, int root, void* stream) {
    if (ddph_error_t* e =
            guard([&] { self(ctx)->agree(shape_of(CallKind::kBroadcast, buf, -1, root)); }))
      return e;
    return inner(ctx)->broadcast(inner(ctx)->ctx, buf, root, stream);
  }
  static ddph_error_t* barrier(void* ctx) {
    if (ddph_error_t* e =
            guard([&] { self(ctx)->agree(shape_of(CallKind::kBarrier, nullptr, -1, -1)); }))
      return e;
    return inner(ctx)->barrier(inner(ctx)->ctx);
  }
  static ddph_error_t* send(void* ctx, const DLTensor* buf, int peer, void* stream) {
    return inner(ctx)->send(inner(ctx)->ctx, buf, peer, stream);
  }
  static ddph_error_t* recv(void* ctx, DLTensor* buf, int peer, void* stream) {
    return inner(ctx)->recv(inner(ctx)->ctx, buf, peer, stream);
  }
  static ddph_error_t* alltoallv(void* ctx, const DLTensor* send, const int64_t* send_counts,
                                 DLTensor* recv, const int64_t* recv_counts, void* stream) {
    // The counts differ between ranks by design: the kind and dtype agree.
    if (ddph_error_t* e = guard([&] {
          CallShape s = shape_of(CallKind::kAlltoallv, send, -1, -1);
          s.numel = -1;
          self(ctx)->agree(s);
        }))
      return e;
    return inner(ctx)->alltoallv(inner(ctx)->ctx, send, send_counts, recv, recv_counts, stream);
  }
  static ddph_error_t* split(void* ctx, int color, int key, ddph_comm_t** out) {
    if (out != nullptr) *out = nullptr;
    // Color and key differ between ranks by design.
    if (ddph_error_t* e =
            guard([&] { self(ctx)->agree(shape_of(CallKind::kSplit, nullptr, -1, -1)); }))
      return e;
    ddph_comm_t* sub = nullptr;
    if (ddph_error_t* e = inner(ctx)->split(inner(ctx)->ctx, color, key, &sub)) return e;
    if (sub == nullptr) return nullptr;  // a negative color
    return guard([&] { *out = wrap_split(sub, self(ctx)->calls_); });
  }
  static uint64_t bytes_sent(void* ctx) { return inner(ctx)->bytes_sent(inner(ctx)->ctx); }
  static uint64_t bytes_sent_to(void* ctx, int peer) {
    return inner(ctx)->bytes_sent_to(inner(ctx)->ctx, peer);
  }
  static void destroy(void* ctx) {
    // The session's own wrapper is the session's to destroy; hooks destroy
    // only what they split.
    if (self(ctx)->owns_) delete self(ctx);
  }
};

CheckedComm::CheckedComm(ddph_comm_t* inner, ddph_comm_t* control, bool owns,
                         std::shared_ptr<StrictCalls> calls)
    : inner_(inner), control_(control), owns_(owns), calls_(std::move(calls)) {
  // Offer what the inner table offers, as far as this loader knows it.
  const size_t known = std::min(inner->struct_size, sizeof(ddph_comm_t));
  auto has = [&](size_t end) { return known >= end; };
  table_.struct_size = known;
  table_.ctx = this;
  table_.rank = &Calls::rank;
  table_.size = &Calls::size;
  table_.allreduce = inner->allreduce ? &Calls::allreduce : nullptr;
  table_.allgather = inner->allgather ? &Calls::allgather : nullptr;
  table_.reduce_scatter = inner->reduce_scatter ? &Calls::reduce_scatter : nullptr;
  table_.broadcast = inner->broadcast ? &Calls::broadcast : nullptr;
  table_.barrier = inner->barrier ? &Calls::barrier : nullptr;
  table_.send = inner->send ? &Calls::send : nullptr;
  table_.recv = inner->recv ? &Calls::recv : nullptr;
  table_.split = inner->split ? &Calls::split : nullptr;
  table_.bytes_sent = inner->bytes_sent ? &Calls::bytes_sent : nullptr;
  table_.destroy = &Calls::destroy;
  if (has(DDPH_COMM_SIZE_V1_1) && inner->alltoallv) table_.alltoallv = &Calls::alltoallv;
  if (has(DDPH_COMM_SIZE_V1_2) && inner->bytes_sent_to)
    table_.bytes_sent_to = &Calls::bytes_sent_to;
}

CheckedComm::~CheckedComm() {
  if (!owns_) return;
  if (control_ != inner_ && control_->destroy != nullptr) control_->destroy(control_->ctx);
  if (inner_->destroy != nullptr) inner_->destroy(inner_->ctx);
}

void CheckedComm::agree(const CallShape& call) {
  if (comm_size(control_) == 1) return;
  CheckRecord mine;
  mine.kind = int64_t(CheckKind::kCall);
  mine.count = 1;
  mine.bucket = calls_->bucket();
  mine.call = call;
  const std::vector<CheckRecord> all = gather_records(control_, mine);
  const int rank = comm_rank(control_);
  const int other = first_differing_rank(all, rank);
  if (other < 0) return;
  const bool left_hook = std::any_of(all.begin(), all.end(), [](const CheckRecord& r) {
    return r.kind != int64_t(CheckKind::kCall);
  });
  if (left_hook) {
    calls_->set_out_of_step();
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, "the ranks are out of step: "
                                         << describe_records(mine, rank, all[size_t(other)], other)
                                         << "; the hooks made different numbers of calls "
                                            "(comm.bucket_check: strict). The session stops: "
                                            "close it");
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT, "the ranks are not making the same call: "
                                       << describe_records(mine, rank, all[size_t(other)], other)
                                       << "; no rank ran it (comm.bucket_check: strict)");
}

ddph_comm_t* wrap_split(ddph_comm_t* sub, std::shared_ptr<StrictCalls> calls) {
  ddph_comm_t* control = sub;
  try {
    if (sub->split != nullptr && sub->size(sub->ctx) > 1) {
      ddph_comm_t* split = nullptr;
      DDPH_CALL(sub->split(sub->ctx, 0, sub->rank(sub->ctx), &split));
      DDPH_CHECK(split != nullptr, DDPH_INTERNAL, "split of a hook's communicator gave NULL");
      control = split;
    }
    return (new CheckedComm(sub, control, true, std::move(calls)))->table();
  } catch (...) {
    if (control != sub && control->destroy != nullptr) control->destroy(control->ctx);
    if (sub->destroy != nullptr) sub->destroy(sub->ctx);
    throw;
  }
}

}  // namespace loader
}  // namespace ddph
