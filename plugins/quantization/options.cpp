#include "plugins/quantization/options.h"

#include <string>

#include "core/base/dtype.h"
#include "core/base/error.h"
#include "core/base/option_check.h"
#include "core/base/options.h"

namespace ddph {
namespace quantization {
namespace {

// Shared by both hooks, in schema order; channel_size is appended for
// per_channel only, since per_tensor has exactly one channel.
#define DDPH_QUANT_COMMON_SPECS                                                                  \
  spec_string("protocol", "allgather",                                                           \
              "allgather: PyTorch's protocol and result; reduce_scatter: bandwidth-optimal, "    \
              "bytes per rank do not grow with world size; shard: reduce-scatter only, this "    \
              "rank's equal 1/world range holds the mean, the other ranges are scratch (FSDP2)", \
              "allgather|reduce_scatter|shard"),                                                 \
      spec_int("bits", "8", "code width on the wire: 8, 4 or 2 (bit-packed)", 2, 8, "8|4|2"),    \
      spec_string("rounding", "nearest",                                                         \
                  "nearest: half-to-even as PyTorch; stochastic: unbiased, seeded and "          \
                  "reproducible",                                                                \
                  "nearest|stochastic"),                                                         \
      spec_int("seed", "0", "seed of the counter-based RNG of stochastic rounding", 0,           \
               9007199254740992.0),                                                              \
      spec_bool("error_feedback", "false",                                                       \
                "keep each rank's quantization residual per bucket and add it next step"),       \
      spec_int("min_bytes", "0", "buckets with fewer bytes go through plain fp32 allreduce", 0,  \
               9007199254740992.0),                                                              \
      spec_string("nonfinite", "propagate",                                                      \
                  "a bucket with NaN/Inf on any rank: propagate (plain allreduce) or error "     \
                  "(DDPH_NONFINITE)",                                                            \
                  "propagate|error")

}  // namespace

// Function-local statics: hook tables in other files take these pointers
// during their own static initialization.
OptionSpecs per_tensor_specs() {
  static const ddph_option_spec_t specs[] = {DDPH_QUANT_COMMON_SPECS};
  return specs;
}

OptionSpecs per_channel_specs() {
  static const ddph_option_spec_t specs[] = {
      DDPH_QUANT_COMMON_SPECS,
      spec_int("channel_size", "512",
               "elements per channel, each with its own scale and zero point", 1, 1 << 30),
      spec_int(
          "slices", "0",
          "protocol reduce_scatter on the host: pieces a bucket travels in, so that one is "
          "on the wire while the next is quantized; 0: one per full 8 MiB, at most 4. Any value "
          "gives the same result",
          0, 64)};
  return specs;
}

#undef DDPH_QUANT_COMMON_SPECS

OptionSpecs per_channel_gather_specs() {
  static const ddph_option_spec_t specs[] = {
      spec_int("bits", "8", "code width on the wire: 8, 4 or 2 (bit-packed)", 2, 8, "8|4|2"),
      spec_int("channel_size", "512",
               "elements per channel, each with its own scale and zero point; a row's last "
               "channel may be shorter",
               1, 1 << 30),
      spec_string("nonfinite", "propagate",
                  "a row with NaN/Inf on any rank: propagate (plain float32 all-gather of the "
                  "rows) or error (DDPH_NONFINITE)",
                  "propagate|error")};
  return specs;
}

void check_options(OptionCheck& c, const char* hook, bool per_channel) {
  const Options& o = c.options;
  const int64_t bits = o.get_int("bits");
  // The schema can only say [2, 8]; the packing kernels know 8, 4 and 2.
  DDPH_CHECK_OPTION(
      c, bits == 8 || bits == 4 || bits == 2, "bits",
      "quantization/" << hook << ": option 'bits' is " << bits << "; it must be 8, 4 or 2");
  if (per_channel) {
    const int64_t size = o.get_int("channel_size");
    DDPH_CHECK_OPTION(
        c, size >= 1, "channel_size",
        "quantization/" << hook << ": option 'channel_size' is " << size << "; it must be >= 1");
  }
  // A wrapper such as fp16_wrapper would hand 16-bit buckets, which the hook
  // refuses at the first bucket ("bucket dtype float16 is not supported").
  char text[32];
  DDPH_CHECK(c.bucket_dtype.bits == 0 || (c.bucket_dtype.code == kDLFloat &&
                                          c.bucket_dtype.bits == 32 && c.bucket_dtype.lanes == 1),
             DDPH_UNSUPPORTED,
             "quantization/" << hook << ": takes float32 buckets only, but the wrapper around it "
                             << "hands it " << dl_dtype_text(c.bucket_dtype, text)
                             << " buckets; remove the fp16_wrapper/bf16_wrapper around it "
                                "(quantization already sends "
                             << bits << " bits per value) or wrap another hook");
}

QuantOptions parse_options(const ddph_hook_init_t& init, bool per_channel) {
  Options o(init.options, init.num_options);
  QuantOptions q;
  const std::string protocol = o.get_string("protocol");
  q.protocol = protocol == "reduce_scatter" ? Protocol::kReduceScatter
               : protocol == "shard"        ? Protocol::kShard
                                            : Protocol::kAllgather;
  q.bits = int(o.get_int("bits"));
  q.rounding =
      o.get_string("rounding") == "stochastic" ? Rounding::kStochastic : Rounding::kNearest;
  q.seed = uint64_t(o.get_int("seed"));
  q.error_feedback = o.get_bool("error_feedback");
  q.min_bytes = uint64_t(o.get_int("min_bytes"));
  q.nonfinite = o.get_string("nonfinite") == "error" ? NonFinite::kError : NonFinite::kPropagate;
  if (per_channel) {
    q.channel_size = size_t(o.get_int("channel_size"));
    q.slices = size_t(o.get_int("slices"));
  }
  return q;
}

QuantOptions parse_gather_options(const ddph_hook_init_t& init) {
  Options o(init.options, init.num_options);
  QuantOptions q;
  q.bits = int(o.get_int("bits"));
  q.channel_size = size_t(o.get_int("channel_size"));
  q.nonfinite = o.get_string("nonfinite") == "error" ? NonFinite::kError : NonFinite::kPropagate;
  return q;
}

std::string nonfinite_message(const char* hook, const char* where, const std::vector<int>& bad,
                              const ddph_bucket_t& bucket) {
  std::string ranks;
  for (int r : bad) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return std::string("quantization/") + hook + ": bucket " + std::to_string(bucket.index) +
         " (step " + std::to_string(bucket.step) + ") holds NaN or Inf " + where + " rank" +
         (bad.size() > 1 ? "s " : " ") + ranks + "; option nonfinite is 'error'";
}

}  // namespace quantization
}  // namespace ddph
