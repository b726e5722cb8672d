// How a zero hook moves a bucket (options.h's protocol): how its gradients
// are reduced to what this rank steps, and how the stepped values reach
// every rank. One class per protocol behind ZeroProtocol:
// - AllreduceProtocol (PyTorch's ddp_zero_hook): the wrapped hook reduces
//   the whole bucket, each owner broadcasts the parameters it stepped;
// - ReduceScatterProtocol (ZeRO-2): a reduce-scatter leaves each rank the
//   mean of its 1/world of the bucket, and an allgather hands every rank
//   every stepped range: the bytes of one allreduce;
// - QuantizedReduceScatter: the same with the gradients quantized to 8 or
//   4 bits on the wire (ZeRO++'s qgZ, core/quant's codec), the parameters
//   all-gathered in float32.
// Every rank walks the same buckets and pieces in the same order, so the
// collectives pair up without any ownership being sent. On a GPU every
// copy and call is enqueued on the bucket's stream.
#pragma once

#include <ddph/ddph.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/kernels/on_device.h"
#include "plugins/zero/layout.h"
#include "plugins/zero/options.h"
#include "plugins/zero/rank_state.h"
#include "plugins/zero/sharding_plan.h"

namespace ddph {
namespace zero {

class ZeroProtocol {
 public:
  virtual ~ZeroProtocol() = default;
  // Leaves in the bucket buffer (l's layout) the mean gradient of what
  // this rank steps: the whole bucket's, or its own range's.
  virtual void reduce(const ddph_bucket_t& bucket, const BucketLayout& l, const Where& at) = 0;
  // After the owners stepped their pieces of l (params: the bucket's
  // parameters, lent): every piece's values to every rank. World 2 and up.
  virtual void share(const BucketLayout& l, const ShardingPlan& plan, float* const* params,
                     const Where& at) = 0;
  // Adds the bytes it gave to collectives to out->bytes_out.
  virtual void stats(ddph_stats_t* out) const { out->bytes_out += bytes_out(); }

 protected:
  void count_out(uint64_t bytes) { bytes_out_ += bytes; }
  uint64_t bytes_out() const { return bytes_out_.load(); }

 private:
  std::atomic<uint64_t> bytes_out_{0};
};

// The protocol that `options` name, for the hook `who` (a literal). Throws
// when the wrapped hook leaves no reduced gradient in the bucket
// (DDPH_UNSUPPORTED), when reduce_scatter wraps anything but
// default/allreduce (DDPH_INVALID_ARGUMENT: it would be silently ignored),
// or when bits 8 or 4 meet a communicator without alltoallv or send/recv
// (DDPH_UNSUPPORTED). The quantized protocol keeps its error feedback in
// `residuals`, which the rank's checkpoints carry.
std::unique_ptr<ZeroProtocol> make_protocol(const ddph_hook_init_t& init,
                                            const ZeroOptions& options, Residuals& residuals,
                                            const char* who);

class AllreduceProtocol final : public ZeroProtocol {
 public:
  AllreduceProtocol(const ddph_hook_ref_t& inner, ddph_comm_t* comm, const char* who);
  void reduce(const ddph_bucket_t& bucket, const BucketLayout& l, const Where& at) override;
  void share(const BucketLayout& l, const ShardingPlan& plan, float* const* params,
             const Where& at) override;
  // What the wrapped hook sent, plus this protocol's broadcasts.
  void stats(ddph_stats_t* out) const override;

 private:
  ddph_hook_ref_t inner_;
  ddph_comm_t* comm_;
  const char* who_;
  int rank_;
  ScratchBuffers scratch_;
};

class ReduceScatterProtocol : public ZeroProtocol {
 public:
  ReduceScatterProtocol(ddph_comm_t* comm, const char* who);
  void reduce(const ddph_bucket_t& bucket, const BucketLayout& l, const Where& at) override;
  void share(const BucketLayout& l, const ShardingPlan& plan, float* const* params,
             const Where& at) override;

 protected:
  // The exact mean of this rank's range of the n-element bucket at buffer,
  // left in place.
  void reduce_scatter_mean(float* buffer, size_t n, const Where& at);

  ddph_comm_t* comm_;
  const char* who_;
  int rank_, world_;
  ScratchBuffers scratch_;
};

class QuantizedReduceScatter final : public ReduceScatterProtocol {
 public:
  QuantizedReduceScatter(ddph_comm_t* comm, const ZeroOptions& options, Residuals& residuals,
                         const char* who);
  void reduce(const ddph_bucket_t& bucket, const BucketLayout& l, const Where& at) override;

 private:
  int bits_;
  size_t channel_size_;
  bool error_feedback_;
  Residuals& residuals_;
};

}  // namespace zero
}  // namespace ddph
