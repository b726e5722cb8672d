// C trampolines: every entry checks ctx and turns exceptions into errors.
#include "core/comm/backend.h"

#include <cstring>
#include <type_traits>

#include "core/base/abi_struct.h"
#include "core/base/device_allocator.h"
#include "core/base/error.h"
#include "core/base/host.h"

namespace ddph {
namespace {

// The table and its backend in one allocation, so ctx frees both.
struct Handle {
  ddph_comm_t table;
  std::unique_ptr<CommBackend> comm;
  const ddph_device_allocator_t* allocator = nullptr;  // the host's (ABI 1.3), or NULL
};

Handle& handle_of(void* ctx, const char* what) {
  DDPH_CHECK(ctx != nullptr, DDPH_INVALID_ARGUMENT, what << ": ctx is NULL");
  return *static_cast<Handle*>(ctx);
}

// Runs fn(backend) with the communicator's device allocator current.
template <class Fn>
ddph_error_t* call(void* ctx, const char* what, Fn&& fn) {
  return guard([&] {
    Handle& h = handle_of(ctx, what);
    DeviceAllocatorScope scope(h.allocator);
    fn(*h.comm);
  });
}

// A C host may pass any integer as the op, but in C++ an enum whose
// enumerators are 0 to 3 cannot hold 7: reading it as the enum is undefined
// (UBSan stops there). So its bits are checked as an integer first, before
// anything reads it as the enum.
ddph_reduce_op_t valid_op(const ddph_reduce_op_t& op, const char* collective) {
  std::underlying_type_t<ddph_reduce_op_t> raw;
  static_assert(sizeof raw == sizeof op, "an enum is its underlying type");
  std::memcpy(&raw, &op, sizeof raw);
  const long long v = raw;
  DDPH_CHECK(v == DDPH_SUM || v == DDPH_AVG || v == DDPH_MAX || v == DDPH_MIN,
             DDPH_INVALID_ARGUMENT,
             collective << ": op " << int(v) << " is not DDPH_SUM, DDPH_AVG, DDPH_MAX or DDPH_MIN");
  return static_cast<ddph_reduce_op_t>(raw);
}

int rank_fn(void* ctx) {
  return ctx ? static_cast<Handle*>(ctx)->comm->rank() : -1;
}
int size_fn(void* ctx) {
  return ctx ? static_cast<Handle*>(ctx)->comm->size() : -1;
}

ddph_error_t* allreduce_fn(void* ctx, const DLTensor* send, DLTensor* recv, ddph_reduce_op_t op,
                           void* stream) {
  return call(ctx, "allreduce",
              [&](CommBackend& c) { c.allreduce(send, recv, valid_op(op, "allreduce"), stream); });
}

ddph_error_t* allgather_fn(void* ctx, const DLTensor* send, DLTensor* recv, void* stream) {
  return call(ctx, "allgather", [&](CommBackend& c) { c.allgather(send, recv, stream); });
}

ddph_error_t* reduce_scatter_fn(void* ctx, const DLTensor* send, DLTensor* recv,
                                ddph_reduce_op_t op, void* stream) {
  return call(ctx, "reduce_scatter", [&](CommBackend& c) {
    c.reduce_scatter(send, recv, valid_op(op, "reduce_scatter"), stream);
  });
}

ddph_error_t* broadcast_fn(void* ctx, DLTensor* buf, int root, void* stream) {
  return call(ctx, "broadcast", [&](CommBackend& c) { c.broadcast(buf, root, stream); });
}

ddph_error_t* barrier_fn(void* ctx) {
  return call(ctx, "barrier", [&](CommBackend& c) { c.barrier(); });
}

ddph_error_t* send_fn(void* ctx, const DLTensor* buf, int peer, void* stream) {
  return call(ctx, "send", [&](CommBackend& c) { c.send(buf, peer, stream); });
}

ddph_error_t* recv_fn(void* ctx, DLTensor* buf, int peer, void* stream) {
  return call(ctx, "recv", [&](CommBackend& c) { c.recv(buf, peer, stream); });
}

ddph_error_t* alltoallv_fn(void* ctx, const DLTensor* send, const int64_t* send_counts,
                           DLTensor* recv, const int64_t* recv_counts, void* stream) {
  return call(ctx, "alltoallv",
              [&](CommBackend& c) { c.alltoallv(send, send_counts, recv, recv_counts, stream); });
}

ddph_error_t* split_fn(void* ctx, int color, int key, ddph_comm_t** out) {
  return call(ctx, "split", [&](CommBackend& c) {
    DDPH_CHECK(out != nullptr, DDPH_INVALID_ARGUMENT, "split: out is NULL");
    *out = nullptr;
    std::unique_ptr<CommBackend> sub = c.split(color, key);
    if (sub) *out = make_comm_table(std::move(sub), current_device_allocator());
  });
}

uint64_t bytes_sent_fn(void* ctx) {
  return ctx ? static_cast<Handle*>(ctx)->comm->bytes_sent() : 0;
}

uint64_t bytes_sent_to_fn(void* ctx, int peer) {
  return ctx ? static_cast<Handle*>(ctx)->comm->bytes_sent_to(peer) : 0;
}

void destroy_fn(void* ctx) {
  try {
    auto* h = static_cast<Handle*>(ctx);
    DeviceAllocatorScope scope(h != nullptr ? h->allocator : nullptr);
    delete h;
  } catch (...) {
    // Never let teardown throw across the ABI.
  }
}

}  // namespace

ddph_comm_t* make_comm_table(std::unique_ptr<CommBackend> backend,
                             const ddph_device_allocator_t* allocator) {
  auto* h = new Handle{};
  h->allocator = allocator;
  const bool counts = backend->counts_bytes();
  const bool counts_per_peer = backend->counts_bytes_per_peer();
  h->comm = std::move(backend);
  ddph_comm_t& t = h->table;
  t.struct_size = sizeof t;
  t.ctx = h;
  t.rank = &rank_fn;
  t.size = &size_fn;
  t.allreduce = &allreduce_fn;
  t.allgather = &allgather_fn;
  t.reduce_scatter = &reduce_scatter_fn;
  t.broadcast = &broadcast_fn;
  t.barrier = &barrier_fn;
  t.send = &send_fn;
  t.recv = &recv_fn;
  t.split = &split_fn;
  t.bytes_sent = counts ? &bytes_sent_fn : nullptr;
  t.destroy = &destroy_fn;
  t.alltoallv = &alltoallv_fn;
  t.bytes_sent_to = counts_per_peer ? &bytes_sent_to_fn : nullptr;
  return &h->table;
}

bool adopt_host_of(const ddph_comm_init_t* init) {
  if (host() == nullptr && init != nullptr && init->struct_size >= DDPH_COMM_INIT_SIZE_V1_0)
    set_host(init->host);
  return host() != nullptr;
}

ddph_comm_factory_t comm_factory(const char* backend, const char* summary,
                                 const ddph_option_spec_t* options, size_t num_options,
                                 ddph_error_t* (*create)(const ddph_comm_init_t*, ddph_comm_t**),
                                 ddph_error_t* (*check)(ddph_check_t*)) {
  return abi_struct<ddph_comm_factory_t>(backend, summary, options, num_options, create, check);
}

}  // namespace ddph
