// protocol allreduce (PyTorch's ddp_zero_hook): the wrapped hook reduces
// the whole bucket; each share's owner steps its parameters, then
// broadcasts them to the other ranks, share by share in assignment order.
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook.h"
#include "plugins/zero/protocol.h"

namespace ddph {
namespace zero {
namespace {

// The broadcast buffer's workspace key (core/quant/scatter.h reserves 2 to
// 99 for the zero hooks).
constexpr uint64_t kShareKey = 2;

// A share's parameters, back to back, into the buffer or out of it.
void copy_params(const BucketLayout& l, const Share& s, float* const* params, float* buffer,
                 bool into_buffer, const Where& at) {
  for (size_t i = s.first; i < s.first + s.count; ++i) {
    if (into_buffer)
      cast_into(at, DType::F32, params[i], DType::F32, buffer, l.numels[i]);
    else
      cast_into(at, DType::F32, buffer, DType::F32, params[i], l.numels[i]);
    buffer += l.numels[i];
  }
}

}  // namespace

AllreduceProtocol::AllreduceProtocol(const ddph_hook_ref_t& inner, ddph_comm_t* comm,
                                     const char* who)
    : inner_(inner), comm_(comm), who_(who), rank_(comm_rank(comm)) {}

void AllreduceProtocol::reduce(const ddph_bucket_t& bucket, const BucketLayout&, const Where&) {
  run_inner_for_step(inner_, bucket, who_);
}

void AllreduceProtocol::share(const BucketLayout& l, const ShardingPlan& plan, float* const* params,
                              const Where& at) {
  for (const Share& s : plan.shares(l.index)) {
    size_t n = 0;
    for (size_t i = s.first; i < s.first + s.count; ++i) n += l.numels[i];
    const ScratchBuffers::Lease lease = scratch_.get(at, kShareKey, n * sizeof(float));
    float* buffer = static_cast<float*>(lease.data());
    if (s.rank == rank_) copy_params(l, s, params, buffer, /*into_buffer=*/true, at);
    FlatTensor buf(buffer, DType::F32, int64_t(n), at.device);
    comm_broadcast(comm_, buf, s.rank, at.stream);
    count_out(n * sizeof(float));
    if (s.rank != rank_) copy_params(l, s, params, buffer, /*into_buffer=*/false, at);
  }
}

void AllreduceProtocol::stats(ddph_stats_t* out) const {
  // The wrapped hook's bytes (none when it reports nothing), then the
  // broadcasts' (ZeroProtocol::stats adds them).
  out->bytes_out = 0;
  take_inner_bytes_out(inner_, out);
  ZeroProtocol::stats(out);
}

}  // namespace zero
}  // namespace ddph
