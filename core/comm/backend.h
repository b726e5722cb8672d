// Writing a communicator in C++: derive from ddph::CommBackend, then expose it
// as a ddph_comm_t with make_comm_table(). The table's functions check ctx
// and turn exceptions into C errors, so no backend repeats those trampolines.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <memory>

#include "core/base/device_allocator.h"
#include "core/base/error.h"
#include "core/comm/init.h"

namespace ddph {

class CommBackend {
 public:
  virtual ~CommBackend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The collectives of ddph_comm_t, with its contracts (ddph.h). They may
  // throw ddph::Error. `stream` is the caller's cudaStream_t or NULL.
  virtual void allreduce(const DLTensor* send, DLTensor* recv, ddph_reduce_op_t op,
                         void* stream) = 0;
  virtual void allgather(const DLTensor* send, DLTensor* recv, void* stream) = 0;
  virtual void reduce_scatter(const DLTensor* send, DLTensor* recv, ddph_reduce_op_t op,
                              void* stream) = 0;
  virtual void broadcast(DLTensor* buf, int root, void* stream) = 0;
  virtual void barrier() = 0;
  virtual void send(const DLTensor* buf, int peer, void* stream) = 0;
  virtual void recv(DLTensor* buf, int peer, void* stream) = 0;
  virtual void alltoallv(const DLTensor* send, const int64_t* send_counts, DLTensor* recv,
                         const int64_t* recv_counts, void* stream) = 0;
  // NULL when this rank joins no group (negative color).
  virtual std::unique_ptr<CommBackend> split(int color, int key) = 0;
  // Whether bytes_sent() measures anything; the table's bytes_sent is NULL
  // when it does not, so stats report "unknown" rather than 0.
  virtual bool counts_bytes() const { return false; }
  virtual uint64_t bytes_sent() { return 0; }
  // The same per peer (ddph_comm_t.bytes_sent_to, ABI 1.2).
  virtual bool counts_bytes_per_peer() const { return false; }
  virtual uint64_t bytes_sent_to(int /*peer*/) { return 0; }
};

// The collectives of CommBackend, declared in a backend's class body as
// overrides (their contracts are above and in ddph.h).
#define DDPH_COMM_BACKEND_COLLECTIVES                                                          \
  void allreduce(const DLTensor* send, DLTensor* recv, ddph_reduce_op_t op, void* stream)      \
      override;                                                                                \
  void allgather(const DLTensor* send, DLTensor* recv, void* stream) override;                 \
  void reduce_scatter(const DLTensor* send, DLTensor* recv, ddph_reduce_op_t op, void* stream) \
      override;                                                                                \
  void broadcast(DLTensor* buf, int root, void* stream) override;                              \
  void barrier() override;                                                                     \
  void send(const DLTensor* buf, int peer, void* stream) override;                             \
  void recv(DLTensor* buf, int peer, void* stream) override;                                   \
  void alltoallv(const DLTensor* send, const int64_t* send_counts, DLTensor* recv,             \
                 const int64_t* recv_counts, void* stream) override;                           \
  std::unique_ptr<CommBackend> split(int color, int key) override

// A table owning backend; its destroy frees both. Every call through the
// table runs with `allocator` (the host's, ABI 1.3, or NULL) current
// (core/base/device_allocator.h); sub-communicators from split inherit it.
ddph_comm_t* make_comm_table(std::unique_ptr<CommBackend> backend,
                             const ddph_device_allocator_t* allocator = nullptr);

// For a host that calls a factory's create() without ddph_plugin_entry:
// adopts init->host as this plugin's host table. False when there is no
// table at all (no error object can be made then).
bool adopt_host_of(const ddph_comm_init_t* init);

// The body of every comm factory's create(): adopts the host, refuses a
// NULL out and a bad init (check_comm_init, naming `who`), then builds the
// backend with make(*init) and hands back its table; an exception becomes
// the returned error and *out stays NULL.
template <class Make>
ddph_error_t* create_comm(const ddph_comm_init_t* init, ddph_comm_t** out, const char* who,
                          Rendezvous rendezvous, Make&& make) {
  if (!adopt_host_of(init)) {
    if (out != nullptr) *out = nullptr;  // the only way left to say it failed
    return nullptr;
  }
  return guard([&] {
    DDPH_CHECK(out != nullptr, DDPH_INVALID_ARGUMENT, who << ": out is NULL");
    *out = nullptr;
    check_comm_init(init, who, rendezvous);
    const ddph_device_allocator_t* allocator = device_allocator_of(*init, who);
    DeviceAllocatorScope scope(allocator);
    *out = make_comm_table(make(*init), allocator);
  });
}

// A factory's table, for a plugin's static description. check (ABI 1.5,
// optional) judges the options as a whole before connecting; make it
// run_option_check(c, fn) (option_check.h) with the fn that create() runs too.
ddph_comm_factory_t comm_factory(const char* backend, const char* summary,
                                 const ddph_option_spec_t* options, size_t num_options,
                                 ddph_error_t* (*create)(const ddph_comm_init_t*, ddph_comm_t**),
                                 ddph_error_t* (*check)(ddph_check_t*) = nullptr);

}  // namespace ddph
