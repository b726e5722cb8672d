// The options of the zero hooks: the optimizer (core/optim's names,
// defaults and torch.optim's checks, as hook_then_optimizer takes them),
// then how the gradients are reduced and the state is sharded.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>

#include "core/base/option_check.h"
#include "core/optim/functional_optim.h"

namespace ddph {
namespace zero {

enum class Protocol {
  // The wrapped hook reduces the whole bucket; each parameter's owner steps
  // it and broadcasts it (PyTorch's ddp_zero_hook).
  kAllreduce,
  // The bucket is reduce-scattered: each rank receives the mean of its own
  // element range only, steps it, and the ranges are all-gathered (ZeRO-2).
  kReduceScatter,
};

struct ZeroOptions {
  optim::OptimConfig optim;
  Protocol protocol = Protocol::kAllreduce;
  bool shard_buckets = false;  // allreduce: PyTorch's shard_buckets assignment
  // reduce_scatter: the gradients' width on the wire, 32 (exact float32) or
  // 8 or 4 (quantized per channel of channel_size elements, qgZ), with or
  // without error feedback.
  int bits = 32;
  size_t channel_size = 512;
  bool error_feedback = true;
};

// optimizer_specs() and protocol, shard_buckets, bits, channel_size,
// error_feedback.
const ddph_option_spec_t* zero_specs(size_t* count);

// The optimizer's checks, shard_buckets only with protocol allreduce
// (reduce_scatter always splits every bucket over every rank), and bits
// below 32 only with protocol reduce_scatter. Throws
// DDPH_INVALID_ARGUMENT naming the option and the hook `who`.
void check_zero_options(OptionCheck& c, const char* who);

ZeroOptions parse_zero_options(const ddph_hook_init_t& init, const char* who);

const char* protocol_name(Protocol p);

}  // namespace zero
}  // namespace ddph
