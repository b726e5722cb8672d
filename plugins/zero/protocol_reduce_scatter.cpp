// protocol reduce_scatter (ZeRO-2), exact: the mean of each rank's range of
// the bucket by the communicator's reduce-scatter, and the stepped ranges
// back to every rank by its allgather. The W ranges are W blocks of
// floor(n / W) elements, the communicator's own blocks, and the few left
// over go to the last rank, which also owns them (layout.h's rank_range).
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "plugins/zero/protocol.h"

namespace ddph {
namespace zero {
namespace {

// The gather buffer's workspace key (core/quant/scatter.h reserves 2 to 99
// for the zero hooks).
constexpr uint64_t kGatherKey = 3;

}  // namespace

ReduceScatterProtocol::ReduceScatterProtocol(ddph_comm_t* comm, const char* who)
    : comm_(comm), who_(who), rank_(comm_rank(comm)), world_(comm_size(comm)) {}

void ReduceScatterProtocol::reduce(const ddph_bucket_t& bucket, const BucketLayout& l,
                                   const Where& at) {
  reduce_scatter_mean(static_cast<float*>(data_ptr(bucket.buffer)), l.n, at);
}

// Left in place in the bucket buffer (whose other elements become
// scratch): the communicator's in-place reduce-scatter (the mean,
// divide-first as default/allreduce averages) of the W blocks, and an
// allreduce of the elements left over. Nothing of bucket size is allocated
// or copied.
void ReduceScatterProtocol::reduce_scatter_mean(float* buffer, size_t n, const Where& at) {
  if (world_ == 1) return;  // the mean of one rank's gradient is itself
  const size_t width = block_width(n, world_), blocks = width * size_t(world_);
  if (width > 0) {
    FlatTensor send(buffer, DType::F32, int64_t(blocks), at.device);
    FlatTensor recv(buffer + size_t(rank_) * width, DType::F32, int64_t(width), at.device);
    comm_reduce_scatter(comm_, send, recv, DDPH_AVG, at.stream);
    count_out(blocks * sizeof(float));
  }
  if (blocks < n) {
    FlatTensor tail(buffer + blocks, DType::F32, int64_t(n - blocks), at.device);
    comm_allreduce(comm_, tail, DDPH_AVG, at.stream);
    count_out((n - blocks) * sizeof(float));
  }
}

// Every rank's stepped range to every rank: an allgather of the W blocks,
// then the last rank's leftover elements broadcast, into a buffer that ends
// with the whole bucket's updated values.
void ReduceScatterProtocol::share(const BucketLayout& l, const ShardingPlan& plan,
                                  float* const* params, const Where& at) {
  const std::vector<Piece>& pieces = plan.pieces(l.index);
  const size_t width = block_width(l.n, world_), blocks = width * size_t(world_);
  const Range mine = rank_range(l.n, world_, rank_);
  const ScratchBuffers::Lease lease = scratch_.get(at, kGatherKey, l.n * sizeof(float));
  float* all = static_cast<float*>(lease.data());
  // This rank's range goes straight into its place in `all` (an in-place
  // allgather); elements between parameters are zeros.
  zero_bytes(at, all + mine.begin, mine.count * sizeof(float), who_);
  for (const Piece& p : pieces)
    if (p.rank == rank_)
      cast_into(at, DType::F32, params[p.param] + p.begin, DType::F32,
                all + l.offsets[p.param] + p.begin, p.count);
  if (width > 0) {
    FlatTensor send(all + mine.begin, DType::F32, int64_t(width), at.device);
    FlatTensor recv(all, DType::F32, int64_t(blocks), at.device);
    comm_allgather(comm_, send, recv, at.stream);
    count_out(width * sizeof(float));
  }
  if (blocks < l.n) {
    FlatTensor buf(all + blocks, DType::F32, int64_t(l.n - blocks), at.device);
    comm_broadcast(comm_, buf, world_ - 1, at.stream);
    count_out((l.n - blocks) * sizeof(float));
  }
  for (const Piece& p : pieces)
    if (p.rank != rank_)
      cast_into(at, DType::F32, all + l.offsets[p.param] + p.begin, DType::F32,
                params[p.param] + p.begin, p.count);
}

}  // namespace zero
}  // namespace ddph
