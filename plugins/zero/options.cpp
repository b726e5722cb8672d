#include "plugins/zero/options.h"

#include <string>
#include <vector>

#include "core/base/options.h"
#include "core/optim/optimizer_options.h"

namespace ddph {
namespace zero {

const ddph_option_spec_t* zero_specs(size_t* count) {
  static const std::vector<ddph_option_spec_t> specs = optim::optimizer_specs({
      spec_string("protocol", "allreduce",
                  "allreduce: the wrapped hook reduces each bucket, each parameter's "
                  "owner steps it and broadcasts it (PyTorch's ddp_zero_hook); "
                  "reduce_scatter: each rank receives and steps only the mean of its "
                  "1/world of each bucket, then the ranges are all-gathered (ZeRO-2)",
                  "allreduce|reduce_scatter"),
      spec_bool("shard_buckets", "false",
                "allreduce: split buckets over ranks by element count, as "
                "ZeroRedundancyOptimizer's shard_buckets (else whole buckets "
                "round-robin)"),
      spec_int("bits", "32",
               "reduce_scatter: gradient bits on the wire: 32 (exact float32), or 8 "
               "or 4 (quantized per channel, as ZeRO++'s qgZ; the parameters are "
               "all-gathered in float32)",
               4, 32, "32|8|4"),
      spec_int("channel_size", "512",
               "bits 8 or 4: elements per channel, each with its own scale and zero "
               "point",
               1, 1 << 30),
      spec_bool("error_feedback", "true",
                "bits 8 or 4: keep each rank's quantization error per bucket and add "
                "it to the next step's gradient"),
  });
  *count = specs.size();
  return specs.data();
}

const char* protocol_name(Protocol p) {
  return p == Protocol::kAllreduce ? "allreduce" : "reduce_scatter";
}

void check_zero_options(OptionCheck& c, const char* who) {
  optim::check_optimizer_options(c, who);
  DDPH_CHECK_OPTION(c,
                    !(c.options.get_bool("shard_buckets") &&
                      c.options.get_string("protocol") == "reduce_scatter"),
                    "shard_buckets",
                    who << ": option 'shard_buckets' applies to protocol allreduce only; "
                           "reduce_scatter already splits every bucket over every rank");
  const int64_t bits = c.options.get_int("bits");
  DDPH_CHECK_OPTION(c, bits == 32 || c.options.get_string("protocol") == "reduce_scatter", "bits",
                    who << ": option 'bits' is " << bits
                        << ", which quantizes the reduce-scatter; it needs protocol "
                           "reduce_scatter (protocol allreduce reduces with the wrapped hook: "
                           "wrap quantization/per_channel to quantize there)");
}

ZeroOptions parse_zero_options(const ddph_hook_init_t& init, const char* who) {
  Options o(init.options, init.num_options);
  ZeroOptions z;
  z.optim = optim::parse_optimizer(o, who);
  z.protocol = o.get_string("protocol") == "reduce_scatter" ? Protocol::kReduceScatter
                                                            : Protocol::kAllreduce;
  z.shard_buckets = o.get_bool("shard_buckets");
  z.bits = int(o.get_int("bits"));
  z.channel_size = size_t(o.get_int("channel_size"));
  z.error_feedback = o.get_bool("error_feedback");
  return z;
}

}  // namespace zero
}  // namespace ddph
