// protocol reduce_scatter with bits 8 or 4 (ZeRO++'s qgZ): the mean of
// this rank's range from quantized gradients, left in place as the exact
// reduce-scatter leaves it. Each rank quantizes range j of its bucket
// (channels of channel_size, its error feedback added) and sends it to
// rank j (core/quant/scatter.h); each rank then decodes the world's
// encodings of its range and averages them, summing in float32 in rank
// order. Only the gradients are quantized: the parameters are all-gathered
// exact (ReduceScatterProtocol::share). A bucket with NaN or Inf on any
// rank takes the exact path instead, on every rank alike, so the step sees
// what torch's would, and the residuals stay as they were.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/base/tensor.h"
#include "core/quant/codec.h"
#include "core/quant/rank_header.h"
#include "core/quant/scatter.h"
#include "plugins/zero/protocol.h"

namespace ddph {
namespace zero {

QuantizedReduceScatter::QuantizedReduceScatter(ddph_comm_t* comm, const ZeroOptions& options,
                                               Residuals& residuals, const char* who)
    : ReduceScatterProtocol(comm, who),
      bits_(options.bits),
      channel_size_(options.channel_size),
      error_feedback_(options.error_feedback),
      residuals_(residuals) {}

void QuantizedReduceScatter::reduce(const ddph_bucket_t& bucket, const BucketLayout& l,
                                    const Where& at) {
  using namespace quantization;
  float* buffer = static_cast<float*>(data_ptr(bucket.buffer));
  if (world_ == 1) return;  // the mean of one rank's gradient is itself
  std::vector<Chunk> chunks(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) {
    const Range range = rank_range(l.n, world_, r);
    chunks[size_t(r)] =
        Chunk{range.begin, Segment{range.count, std::min(channel_size_, range.count)}};
  }
  ScatterJob job;
  job.data = buffer;
  job.n = l.n;
  job.rank = rank_;
  job.world = world_;
  job.index = l.index;
  job.step = bucket.step;
  job.at = at;
  if (error_feedback_) {
    // Zeros at first, and whenever the bucket's length changed (a
    // regroup); taken along when the bucket changed memory.
    Residuals::Arrays& r = residuals_[l.index];
    ResidentFloats &kept = r[kOwnResidual], &spare = r[kSpareResidual];
    kept.move_to(at);
    kept.fit(at, l.n);
    spare.fit(at, l.n);
    job.residual_in = kept.data();
    job.residual = spare.data();
  }
  const OwnEncoding encoding{bits_, false, 0};
  const ScatterLayout layout = lay_out_scatter(chunks, channel_size_, bits_, rank_,
                                               scatter_slice_count(job, channel_size_, 0));
  Codec codec(job.at, scratch_, bits_, layout.longest, layout.most_channels,
              layout.slices.size() * size_t(world_));
  const Scattered traded = scatter_encoded(comm_, encoding, job, layout, codec, scratch_);
  // What it handed to the exchange, its own range's encoding included, as
  // the exact path counts its whole send buffer (docs/metrics.md: bytes
  // given to collectives).
  count_out(layout.send_bytes);
  if (!traded.nonfinite_ranks.empty()) {
    reduce_scatter_mean(buffer, l.n, at);
    return;
  }
  for (const ScatterSlice& sl : layout.slices) {
    const Chunk& piece = sl.pieces[size_t(rank_)];
    codec.decode_mean(traded.contributions(sl) + kRankHeaderBytes, sl.mine_bytes, size_t(world_),
                      piece.seg, bits_, world_, buffer + piece.begin);
  }
  if (error_feedback_) {
    Residuals::Arrays& r = residuals_[l.index];
    std::swap(r[kOwnResidual], r[kSpareResidual]);
  }
}

}  // namespace zero
}  // namespace ddph
