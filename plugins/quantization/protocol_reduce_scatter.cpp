// protocol: reduce_scatter. A bandwidth-optimal quantized allreduce for any
// world size:
//   1. each rank quantizes chunk j of its bucket (its own params, its
//      rounding, its error feedback) and sends it, behind its rank header,
//      to rank j, the chunk's owner: one alltoallv for all chunks
//      (core/quant/scatter.h, which the zero family shares);
//   2. each owner dequantizes the world-size contributions to its chunk,
//      summing in fp32 in rank order, divides by the world size, and
//      re-quantizes the mean (nearest), a few channels at a time on a host;
//   3. an allgather hands every rank every owner's re-quantized chunk, and
//      every rank dequantizes the same bytes, so all end bit-identical.
// Each rank sends about 2 (W-1)/W of the bucket's codes, plus params:
// the figure does not grow with W.
//
// The owner dequantizes its own quantized chunk too, rather than adding its
// exact values: every contribution is then quantized exactly once, the same
// for every rank, and error feedback sees the error of what it sent.
//
// With error feedback the owner also keeps the error of re-quantizing its
// chunk's mean and adds it to the next step's mean (DeepSpeed's "server
// error"), so no quantization error of this protocol is lost for good.
//
// On the host a per_channel bucket travels in slices (option `slices`):
// slice s holds piece s of every chunk, each piece whole channels, and runs
// the three steps above on its own. Slice s is on the wire while slice s + 1
// is quantized and slice s - 1 decoded (core/comm/pipeline.h), and since every
// channel keeps its scale, its rounding counters and its residuals, the
// result has the same bits for any number of slices. Every slice carries
// rank headers; the last one's covers the whole bucket, and all ranks read
// it before any step 2 begins, so a non-finite bucket still leaves the
// bucket and the owner residuals untouched.
#include <vector>

#include "core/comm/comm_call.h"
#include "core/comm/pipeline.h"
#include "core/quant/chunking.h"
#include "core/quant/codec.h"
#include "core/quant/rank_header.h"
#include "core/quant/scatter.h"
#include "plugins/quantization/protocols.h"

namespace ddph {
namespace quantization {

Outcome run_reduce_scatter(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                           Workspace& ws) {
  const int world = job.world;
  const size_t w = static_cast<size_t>(world), me = size_t(job.rank);
  const ScatterLayout l =
      lay_out_scatter(split_chunks(job.n, o.channel_size, world), o.channel_size, o.bits, job.rank,
                      scatter_slice_count(job, o.channel_size, o.slices));
  const size_t count = l.slices.size();

  // Every piece of the own data, then the owner's means.
  Codec codec(job.at, ws.scratch, o.bits, l.longest, l.most_channels, count * (w + 1));
  Outcome out;

  // 1. Quantize every piece of this rank's data and trade contributions.
  const Scattered traded = scatter_encoded(comm, own_encoding(o), job, l, codec, ws.scratch);
  out.bytes = traded.bytes;
  out.nonfinite_ranks = traded.nonfinite_ranks;
  if (!out.nonfinite_ranks.empty()) return out;

  // 2. The owner's mean of its pieces, in rank order from zeros,
  // re-quantized. allgather wants equal blocks: each is padded to the
  // slice's widest encoding.
  const Chunk& mine = l.chunks[me];
  const ScratchBuffers::Lease acc_buf = ws.scratch.get(job.at, kAccKey, mine.seg.n * sizeof(float));
  const ScratchBuffers::Lease gather_buf = ws.scratch.get(job.at, kGatherKey, l.gather_bytes);
  float* acc = static_cast<float*>(acc_buf.data());
  uint8_t* gathered = static_cast<uint8_t*>(gather_buf.data());
  float* owner_residual = job.owner_residual ? job.owner_residual(mine.seg.n) : nullptr;
  PipelineStages share;
  share.before = [&](size_t s) {
    const ScatterSlice& sl = l.slices[s];
    const Chunk& piece = sl.pieces[me];
    const size_t at = piece.begin - mine.begin;  // within the own chunk
    uint8_t* own = gathered + sl.gather_begin + me * sl.widest;
    EncodeArgs nearest;
    nearest.bits = o.bits;
    if (owner_residual != nullptr) nearest.residual = owner_residual + at;
    // Finite contributions whose fp32 sum could pass FLT_MAX are summed in
    // double (decode_mean), so the mean is finite and re-quantizes.
    codec.encode_mean_or_nan(traded.contributions(sl) + kRankHeaderBytes, sl.mine_bytes, w,
                             piece.seg, world, nearest, acc + at, own);
    const size_t own_bytes = sl.mine_bytes - kRankHeaderBytes;
    codec.zero(own + own_bytes, sl.widest - own_bytes);
  };
  share.transfer = [&](size_t s) {
    const ScatterSlice& sl = l.slices[s];
    if (sl.widest == 0) return;
    uint8_t* block = gathered + sl.gather_begin;
    FlatTensor send(block + me * sl.widest, DType::U8, int64_t(sl.widest), job.at.device);
    FlatTensor recv(block, DType::U8, int64_t(w * sl.widest), job.at.device);
    comm_allgather(comm, send, recv, job.at.stream);
    out.bytes += sl.widest;
  };
  share.after = [&](size_t s) {
    const ScatterSlice& sl = l.slices[s];
    for (size_t j = 0; j < w; ++j)
      codec.decode_into(gathered + sl.gather_begin + j * sl.widest, sl.pieces[j].seg, o.bits,
                        job.data + sl.pieces[j].begin);
  };
  run_pipelined(count, share);
  return out;
}

Outcome run_shard(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job, Workspace& ws) {
  const size_t w = size_t(job.world), me = size_t(job.rank);
  const ScatterLayout l =
      lay_out_scatter(split_chunks(job.n, o.channel_size, job.world), o.channel_size, o.bits,
                      job.rank, scatter_slice_count(job, o.channel_size, o.slices));
  Codec codec(job.at, ws.scratch, o.bits, l.longest, l.most_channels, l.slices.size() * w);
  Outcome out;
  const Scattered traded = scatter_encoded(comm, own_encoding(o), job, l, codec, ws.scratch);
  out.bytes = traded.bytes;
  out.nonfinite_ranks = traded.nonfinite_ranks;
  if (!out.nonfinite_ranks.empty()) return out;
  // The own pieces are read from the received contributions only, so the
  // mean may overwrite the own chunk in place.
  for (const ScatterSlice& sl : l.slices) {
    const Chunk& piece = sl.pieces[me];
    codec.decode_mean(traded.contributions(sl) + kRankHeaderBytes, sl.mine_bytes, w, piece.seg,
                      o.bits, job.world, job.data + piece.begin);
  }
  return out;
}

}  // namespace quantization
}  // namespace ddph
