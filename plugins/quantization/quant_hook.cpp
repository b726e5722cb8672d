// per_tensor and per_channel: one hook class, which decides how a bucket
// travels (plain allreduce for small or non-finite buckets, else one of the
// two quantized protocols) and keeps the error-feedback residuals. The same
// code runs host and CUDA buckets: the protocols reach memory only through
// Codec and the Workspace (codec.h), and residuals live where their
// buckets run.
#include <string>
#include <utility>
#include <vector>

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook.h"
#include "core/kernels/on_device.h"
#include "core/memory/resident_floats.h"
#include "core/quant/chunking.h"
#include "plugins/quantization/hooks.h"
#include "plugins/quantization/options.h"
#include "plugins/quantization/protocols.h"
#include "plugins/quantization/residuals.h"

namespace ddph {
namespace quantization {
namespace {

template <bool PerChannel>
class QuantHook : public Hook {
 public:
  static constexpr const char* kName = PerChannel ? "per_channel" : "per_tensor";
  static constexpr HookListing kListing{
      kName, PerChannel
                 ? "uint8/4/2-bit quantized mean, one scale per channel_size elements (PyTorch's "
                   "quantization_perchannel_hook)"
                 : "uint8/4/2-bit quantized mean, one scale per bucket (PyTorch's "
                   "quantization_pertensor_hook)"};
  static constexpr bool kRunsOnCuda = true;
  // Without error feedback nothing is kept from one bucket to the next (its
  // workspace is scratch), so buckets may run on lanes (ABI 1.9).
  static constexpr bool kStatelessByState = true;
  static constexpr const char* kWho =
      PerChannel ? "quantization/per_channel" : "quantization/per_tensor";
  static OptionSpecs option_specs() {
    return PerChannel ? per_channel_specs() : per_tensor_specs();
  }
  static void check_options(OptionCheck& c) { quantization::check_options(c, kName, PerChannel); }

  explicit QuantHook(const ddph_hook_init_t& init)
      : comm_(init.comm), opts_(parse_options(init, PerChannel)) {
    DDPH_CHECK(opts_.protocol == Protocol::kAllgather || comm_can_alltoallv(comm_),
               DDPH_UNSUPPORTED,
               kWho << ": protocol reduce_scatter needs alltoallv or send/recv from the "
                       "communicator, which has neither; use protocol allgather");
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    BucketJob job = bucket_job(comm_, bucket, dtype, kWho);
    const uint64_t bytes = uint64_t(job.n) * sizeof(float);
    count_in(bytes);
    if (job.n == 0) return done.ok();
    if (bytes < opts_.min_bytes) return allreduce(job, done);
    if (opts_.protocol == Protocol::kShard) check_shard(job, bucket);

    if (opts_.error_feedback) {
      // The protocol reads the kept residual and writes a spare one: the
      // kept one must not change for a bucket that falls back or fails
      // because some rank's is not finite.
      job.residual_in = residuals_.own(bucket.index, job.n, job.at);
      job.residual = residuals_.spare_own(bucket.index, job.at);
      const uint64_t index = bucket.index;
      const Where at = job.at;
      job.owner_residual = [this, index, at](size_t m) { return residuals_.owner(index, m, at); };
    }
    const Outcome out =
        opts_.protocol == Protocol::kAllgather ? run_allgather(comm_, opts_, job, ws_)
        : opts_.protocol == Protocol::kShard   ? run_shard(comm_, opts_, job, ws_)
                                               : run_reduce_scatter(comm_, opts_, job, ws_);
    count_out(out.bytes);
    if (!out.nonfinite_ranks.empty()) {
      // Every rank saw the same headers, so every rank takes the same branch.
      if (opts_.nonfinite == NonFinite::kPropagate) return allreduce(job, done);
      return done.fail(
          Error(DDPH_NONFINITE, nonfinite_message(kName, "on", out.nonfinite_ranks, bucket)));
    }
    if (opts_.error_feedback) residuals_.keep_copy(bucket.index);
    done.ok();
  }

  uint32_t state_flags(uint32_t table_flags) const override {
    return opts_.error_feedback ? table_flags & ~DDPH_HOOK_STATELESS
                                : table_flags | DDPH_HOOK_STATELESS;
  }

  // ABI 1.10: the residuals of bucket.index go into the bucket, so that the
  // next reduction, by whichever hook, pays them back. Each rank's own
  // residual is its error in its own units: a mean over ranks divides it by
  // the world size, as the quantized mean it was left out of did. The owner
  // residual is an error of the mean of this rank's chunk, which no other
  // rank holds: world times it, on this rank alone, averages back to it.
  // Without error feedback nothing is kept, and nothing changes.
  void take_residual(const ddph_bucket_t& bucket, DType dtype) override {
    if (!opts_.error_feedback) return;
    const BucketJob job = bucket_job(comm_, bucket, dtype, kWho);
    BucketResidual kept;
    if (!residuals_.peek(bucket.index, &kept)) return;
    const Chunk mine = split_chunks(job.n, opts_.channel_size, job.world)[size_t(job.rank)];
    check_residual_length(bucket, "", kept.own.size(), job.n);
    check_residual_length(bucket, "owner ", kept.owner.size(), mine.seg.n);
    std::vector<float> add(job.n, 0.0f);
    if (!kept.own.empty()) add = std::move(kept.own);
    for (size_t j = 0; j < kept.owner.size(); ++j)
      add[mine.begin + j] += float(job.world) * kept.owner[j];
    add_host_floats(job.at, DType::F32, job.data, add.data(), job.n, kWho);
    residuals_.forget(bucket.index);
  }

  void save_state(ddph_write_fn write, void* sink) override {
    const std::string blob = encode_residuals(residuals_.to_host());
    write(sink, blob.data(), blob.size());
  }

  void load_state(const void* bytes, size_t n) override {
    residuals_.replace(decode_residuals(bytes, n));  // all or nothing: decode checks first
  }

 private:
  // Protocol shard promises rank r the equal range [r n/W, (r+1) n/W), which
  // FSDP2 reads as its shard: the chunks must all be that long.
  void check_shard(const BucketJob& job, const ddph_bucket_t& bucket) const {
    const size_t w = size_t(job.world), unit = opts_.channel_size ? opts_.channel_size : 1;
    DDPH_CHECK(job.n % w == 0 && (job.n / w) % unit == 0, DDPH_INVALID_ARGUMENT,
               kWho << ": protocol shard: bucket " << bucket.index << " has " << job.n
                    << " elements, not a multiple of world size " << w
                    << (opts_.channel_size ? " times option 'channel_size' " : "")
                    << (opts_.channel_size ? std::to_string(opts_.channel_size) : "")
                    << "; each rank's range must be whole and equal");
  }

  // A kept residual of another length than the bucket's layout needs (an
  // empty one: nothing was kept) would be added to the wrong elements.
  void check_residual_length(const ddph_bucket_t& bucket, const char* what, size_t have,
                             size_t want) const {
    DDPH_CHECK(have == 0 || have == want, DDPH_INVALID_ARGUMENT,
               kWho << ": take_residual: bucket " << bucket.index << " keeps " << have
                    << " floats of " << what << "residual, but a bucket of "
                    << bucket.buffer.shape[0] << " elements needs " << want
                    << "; the bucket must have the layout this hook last reduced");
  }

  // PyTorch's allreduce numerics (DDPH_AVG is divide-first), for buckets
  // too small to gain from quantizing and for buckets holding NaN or Inf
  // on some rank, whose non-finite values then land exactly where
  // allreduce puts them.
  void allreduce(const BucketJob& job, const Completion& done) {
    FlatTensor buf(job.data, DType::F32, int64_t(job.n), job.at.device);
    count_out(job.n * sizeof(float));
    comm_allreduce(comm_, buf, DDPH_AVG, job.at.stream);
    done.ok();
  }

  ddph_comm_t* comm_;
  QuantOptions opts_;
  Residuals residuals_;
  Workspace ws_;
};

}  // namespace

const ddph_hook_t& per_tensor_hook() {
  return hook_table<QuantHook<false>>();
}

const ddph_hook_t& per_channel_hook() {
  return hook_table<QuantHook<true>>();
}

}  // namespace quantization
}  // namespace ddph
