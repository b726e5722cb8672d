// protocol: reduce_scatter. A bandwidth-optimal quantized allreduce for any
// world size:
//   1. each rank quantizes chunk j of its bucket (its own params, its
//      rounding, its error feedback) and sends it, behind its rank header,
//      to rank j, the chunk's owner: one alltoallv for all chunks;
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
#include <algorithm>
#include <vector>

#include "core/comm_call.h"
#include "plugins/quantization/chunking.h"
#include "plugins/quantization/codec.h"
#include "plugins/quantization/protocols.h"
#include "plugins/quantization/rank_header.h"

namespace ddph {
namespace quantization {

Outcome run_reduce_scatter(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                           Workspace& ws) {
  const int world = job.world, rank = job.rank;
  const size_t w = static_cast<size_t>(world);
  const std::vector<Chunk> chunks = split_chunks(job.n, o.channel_size, world);
  // Contribution j (to rank j): the rank header, then chunk j's encoding.
  std::vector<int64_t> send_counts(w);
  std::vector<size_t> offset(w + 1, 0);  // of contribution j in the send buffer
  size_t widest = 0, longest = 0, most_channels = 0;
  for (size_t j = 0; j < w; ++j) {
    const size_t bytes = encoded_bytes(chunks[j].seg, o.bits);
    send_counts[j] = int64_t(kRankHeaderBytes + bytes);
    offset[j + 1] = offset[j] + size_t(send_counts[j]);
    widest = std::max(widest, bytes);
    longest = std::max(longest, chunks[j].seg.n);
    most_channels = std::max(most_channels, segment_channels(chunks[j].seg));
  }
  const Chunk& mine = chunks[size_t(rank)];
  const size_t mine_bytes = size_t(send_counts[size_t(rank)]);  // from every rank, header included
  const std::vector<int64_t> recv_counts(w, static_cast<int64_t>(mine_bytes));

  // Every chunk of the own data, then the owner's mean.
  Codec codec(job.at, ws.scratch, o.bits, longest, most_channels, w + 1);
  const ScratchBuffers::Lease send_buf = ws.scratch.get(job.at, kSendKey, offset[w]);
  const ScratchBuffers::Lease recv_buf = ws.scratch.get(job.at, kRecvKey, w * mine_bytes);
  uint8_t* sent = static_cast<uint8_t*>(send_buf.data());
  uint8_t* received = static_cast<uint8_t*>(recv_buf.data());

  // 1. Quantize every chunk of this rank's data and trade contributions.
  for (size_t j = 0; j < w; ++j)
    codec.encode(job.data + chunks[j].begin, chunks[j].seg,
                 own_encode_args(o, job, chunks[j].begin), sent + offset[j] + kRankHeaderBytes);
  for (size_t j = 0; j < w; ++j) codec.write_rank_header(sent + offset[j]);
  {
    FlatTensor send(sent, DType::U8, int64_t(offset[w]), job.at.device);
    FlatTensor recv(received, DType::U8, int64_t(w * mine_bytes), job.at.device);
    comm_alltoallv(comm, send, send_counts, recv, recv_counts, job.at.stream);
  }
  Outcome out;
  out.bytes = offset[w] - mine_bytes;  // the own contribution stays local
  out.nonfinite_ranks = codec.nonfinite_senders(received, mine_bytes, world);
  if (!out.nonfinite_ranks.empty()) return out;

  // 2. The owner's mean of its chunk, in rank order from zeros, re-quantized.
  // allgather wants equal blocks: each is padded to the widest chunk's
  // encoding.
  const size_t m = mine.seg.n;
  const ScratchBuffers::Lease acc_buf = ws.scratch.get(job.at, kAccKey, m * sizeof(float));
  const ScratchBuffers::Lease gather_buf = ws.scratch.get(job.at, kGatherKey, w * widest);
  uint8_t* gathered = static_cast<uint8_t*>(gather_buf.data());
  uint8_t* own = gathered + size_t(rank) * widest;
  EncodeArgs nearest;
  nearest.bits = o.bits;
  if (job.owner_residual) nearest.residual = job.owner_residual(m);
  // Finite contributions whose fp32 sum could pass FLT_MAX are summed in
  // double (decode_mean), so the mean is finite and re-quantizes.
  codec.encode_mean_or_nan(received + kRankHeaderBytes, mine_bytes, w, mine.seg, world, nearest,
                           static_cast<float*>(acc_buf.data()), own);
  const size_t own_bytes = mine_bytes - kRankHeaderBytes;
  codec.zero(own + own_bytes, widest - own_bytes);
  if (widest != 0) {
    FlatTensor send(own, DType::U8, int64_t(widest), job.at.device);
    FlatTensor recv(gathered, DType::U8, int64_t(w * widest), job.at.device);
    comm_allgather(comm, send, recv, job.at.stream);
    out.bytes += widest;
  }
  for (int j = 0; j < world; ++j)
    codec.decode_into(gathered + size_t(j) * widest, chunks[j].seg, o.bits,
                      job.data + chunks[j].begin);
  return out;
}

}  // namespace quantization
}  // namespace ddph
