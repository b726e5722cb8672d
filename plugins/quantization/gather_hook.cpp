// per_channel_gather: the quantization family's all-gather hook, for
// FSDP2's weight all-gather (ddphooks.torch.fsdp.compress's `weights`),
// as ZeRO++'s qwZ quantizes the weights it gathers. A bucket is world
// equal rows, this rank's row filled by the caller; the hook leaves every
// row decoded from its rank's 8-bit (or 4- or 2-bit) per-channel codes,
// the same bits on every rank. It averages nothing, so it is no gradient
// hook: it keeps no state (nothing to checkpoint).
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook.h"
#include "plugins/quantization/hooks.h"
#include "plugins/quantization/options.h"
#include "plugins/quantization/protocols.h"

namespace ddph {
namespace quantization {
namespace {

class GatherHook : public Hook {
 public:
  static constexpr const char* kName = "per_channel_gather";
  static constexpr HookListing kListing{
      kName,
      "uint8/4/2-bit all-gather of world rows, one scale per channel_size elements, every row "
      "decoded on every rank (FSDP2's weight all-gather; ZeRO++'s qwZ)"};
  static constexpr bool kRunsOnCuda = true;
  static constexpr const char* kWho = "quantization/per_channel_gather";
  static OptionSpecs option_specs() { return per_channel_gather_specs(); }
  static void check_options(OptionCheck& c) { quantization::check_options(c, kName, true); }

  explicit GatherHook(const ddph_hook_init_t& init)
      : comm_(init.comm), opts_(parse_gather_options(init)) {}

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    BucketJob job = bucket_job(comm_, bucket, dtype, kWho);
    // Equal rows; each row is quantized on its own, its last channel as
    // long as what is left of it (so any row length works, as PyTorch's
    // per-channel hook takes any bucket length).
    const size_t w = size_t(job.world);
    DDPH_CHECK(job.n % w == 0, DDPH_INVALID_ARGUMENT,
               kWho << ": bucket " << bucket.index << " has " << job.n
                    << " elements, not world size " << w
                    << " equal rows (one per rank, this rank's filled)");
    const size_t row = job.n / w;
    // This rank's input is its row (the other rows are where the gather
    // lands), as an fp32 all-gather would hand it to the collective.
    count_in(uint64_t(row) * sizeof(float));
    if (job.n == 0) return done.ok();
    const Outcome out = run_gather(comm_, opts_, job, ws_);
    count_out(out.bytes);
    if (!out.nonfinite_ranks.empty()) {
      // Every rank saw the same headers, so every rank takes the same branch.
      if (opts_.nonfinite == NonFinite::kPropagate) return gather_fp32(job, row, done);
      return done.fail(Error(
          DDPH_NONFINITE, nonfinite_message(kName, "in the row of", out.nonfinite_ranks, bucket)));
    }
    done.ok();
  }

 private:
  // A row holds NaN or Inf: the rows as they are, so that they land on
  // every rank where a plain all-gather puts them.
  void gather_fp32(const BucketJob& job, size_t row, const Completion& done) {
    FlatTensor send(job.data + size_t(job.rank) * row, DType::F32, int64_t(row), job.at.device);
    FlatTensor recv(job.data, DType::F32, int64_t(job.n), job.at.device);
    count_out(row * sizeof(float));
    comm_allgather(comm_, send, recv, job.at.stream);
    done.ok();
  }

  ddph_comm_t* comm_;
  QuantOptions opts_;
  Workspace ws_;
};

}  // namespace

const ddph_hook_t& per_channel_gather_hook() {
  return hook_table<GatherHook>();
}

}  // namespace quantization
}  // namespace ddph
