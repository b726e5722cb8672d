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
//
// On the host a per_channel bucket travels in slices (option `slices`):
// slice s holds piece s of every chunk, each piece whole channels, and runs
// the three steps above on its own. Slice s is on the wire while slice s + 1
// is quantized and slice s - 1 decoded (core/hook/pipeline.h), and since every
// channel keeps its scale, its rounding counters and its residuals, the
// result has the same bits for any number of slices. Every slice carries
// rank headers; the last one's covers the whole bucket, and all ranks read
// it before any step 2 begins, so a non-finite bucket still leaves the
// bucket and the owner residuals untouched.
#include <algorithm>
#include <vector>

#include "core/hook/comm_call.h"
#include "core/hook/pipeline.h"
#include "plugins/quantization/chunking.h"
#include "plugins/quantization/codec.h"
#include "plugins/quantization/protocols.h"
#include "plugins/quantization/rank_header.h"

namespace ddph {
namespace quantization {
namespace {

// Where one slice lies in the protocol's three buffers.
struct Slice {
  std::vector<Chunk> pieces;  // piece j goes to rank j
  // Contribution j: the rank header, then piece j's encoding.
  std::vector<int64_t> send_counts;
  std::vector<size_t> send_at;  // of contribution j, from the send buffer's start
  size_t send_begin = 0, send_bytes = 0;
  size_t mine_bytes = 0;  // each rank's contribution to this rank's piece, header included
  size_t recv_begin = 0;  // world contributions of mine_bytes each
  size_t widest = 0;      // the allgather block: the slice's widest encoding
  size_t gather_begin = 0;
};

struct Layout {
  std::vector<Chunk> chunks;
  std::vector<Slice> slices;
  size_t send_bytes = 0, recv_bytes = 0, gather_bytes = 0;
  size_t longest = 0, most_channels = 0;  // over every piece, for the codec's scratch
};

Layout lay_out(const QuantOptions& o, const BucketJob& job, size_t slices) {
  const size_t w = size_t(job.world), rank = size_t(job.rank);
  Layout l;
  l.chunks = split_chunks(job.n, o.channel_size, job.world);
  std::vector<std::vector<Chunk>> pieces(w);  // pieces[j][s]
  for (size_t j = 0; j < w; ++j)
    pieces[j] = slices == 1 ? std::vector<Chunk>{l.chunks[j]}
                            : split_pieces(l.chunks[j], o.channel_size, slices);
  l.slices.resize(slices);
  for (size_t s = 0; s < slices; ++s) {
    Slice& sl = l.slices[s];
    sl.send_begin = l.send_bytes;
    for (size_t j = 0; j < w; ++j) {
      const Chunk& p = pieces[j][s];
      const size_t bytes = encoded_bytes(p.seg, o.bits);
      sl.pieces.push_back(p);
      sl.send_at.push_back(l.send_bytes);
      sl.send_counts.push_back(int64_t(kRankHeaderBytes + bytes));
      l.send_bytes += kRankHeaderBytes + bytes;
      sl.widest = std::max(sl.widest, bytes);
      l.longest = std::max(l.longest, p.seg.n);
      l.most_channels = std::max(l.most_channels, segment_channels(p.seg));
    }
    sl.send_bytes = l.send_bytes - sl.send_begin;
    sl.mine_bytes = size_t(sl.send_counts[rank]);
    sl.recv_begin = l.recv_bytes;
    l.recv_bytes += w * sl.mine_bytes;
    sl.gather_begin = l.gather_bytes;
    l.gather_bytes += w * sl.widest;
  }
  return l;
}

// Slices only pay for big host buckets of whole channels: one per 8 MiB of
// floats, at most 4. (More, smaller slices measured slower on a 1 Gbit/s
// link: each is one more round trip of every rank; docs/lab.md.)
size_t slice_count(const QuantOptions& o, const BucketJob& job) {
  if (job.at.cuda() || o.channel_size == 0) return 1;
  if (o.slices != 0) return o.slices;
  const size_t auto_slices = job.n * sizeof(float) / (size_t(8) << 20);
  return std::min<size_t>(4, std::max<size_t>(1, auto_slices));
}

}  // namespace

Outcome run_reduce_scatter(ddph_comm_t* comm, const QuantOptions& o, const BucketJob& job,
                           Workspace& ws) {
  const int world = job.world, rank = job.rank;
  const size_t w = static_cast<size_t>(world), me = size_t(rank);
  const Layout l = lay_out(o, job, slice_count(o, job));
  const size_t count = l.slices.size();

  // Every piece of the own data, then the owner's means.
  Codec codec(job.at, ws.scratch, o.bits, l.longest, l.most_channels, count * (w + 1));
  const ScratchBuffers::Lease send_buf = ws.scratch.get(job.at, kSendKey, l.send_bytes);
  const ScratchBuffers::Lease recv_buf = ws.scratch.get(job.at, kRecvKey, l.recv_bytes);
  uint8_t* sent = static_cast<uint8_t*>(send_buf.data());
  uint8_t* received = static_cast<uint8_t*>(recv_buf.data());
  Outcome out;

  // 1. Quantize every piece of this rank's data and trade contributions.
  PipelineStages trade;
  trade.before = [&](size_t s) {
    const Slice& sl = l.slices[s];
    for (size_t j = 0; j < w; ++j)
      codec.encode(job.data + sl.pieces[j].begin, sl.pieces[j].seg,
                   own_encode_args(o, job, sl.pieces[j].begin),
                   sent + sl.send_at[j] + kRankHeaderBytes);
    // The tally covers every piece encoded so far: the last slice's headers
    // speak for the whole bucket.
    for (size_t j = 0; j < w; ++j) codec.write_rank_header(sent + sl.send_at[j]);
  };
  trade.transfer = [&](size_t s) {
    const Slice& sl = l.slices[s];
    FlatTensor send(sent + sl.send_begin, DType::U8, int64_t(sl.send_bytes), job.at.device);
    FlatTensor recv(received + sl.recv_begin, DType::U8, int64_t(w * sl.mine_bytes), job.at.device);
    const std::vector<int64_t> recv_counts(w, int64_t(sl.mine_bytes));
    comm_alltoallv(comm, send, sl.send_counts, recv, recv_counts, job.at.stream);
    out.bytes += sl.send_bytes - sl.mine_bytes;  // the own contribution stays local
  };
  run_pipelined(count, trade);
  const Slice& last = l.slices.back();
  out.nonfinite_ranks = codec.nonfinite_senders(received + last.recv_begin, last.mine_bytes, world);
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
    const Slice& sl = l.slices[s];
    const Chunk& piece = sl.pieces[me];
    const size_t at = piece.begin - mine.begin;  // within the own chunk
    uint8_t* own = gathered + sl.gather_begin + me * sl.widest;
    EncodeArgs nearest;
    nearest.bits = o.bits;
    if (owner_residual != nullptr) nearest.residual = owner_residual + at;
    // Finite contributions whose fp32 sum could pass FLT_MAX are summed in
    // double (decode_mean), so the mean is finite and re-quantizes.
    codec.encode_mean_or_nan(received + sl.recv_begin + kRankHeaderBytes, sl.mine_bytes, w,
                             piece.seg, world, nearest, acc + at, own);
    const size_t own_bytes = sl.mine_bytes - kRankHeaderBytes;
    codec.zero(own + own_bytes, sl.widest - own_bytes);
  };
  share.transfer = [&](size_t s) {
    const Slice& sl = l.slices[s];
    if (sl.widest == 0) return;
    uint8_t* block = gathered + sl.gather_begin;
    FlatTensor send(block + me * sl.widest, DType::U8, int64_t(sl.widest), job.at.device);
    FlatTensor recv(block, DType::U8, int64_t(w * sl.widest), job.at.device);
    comm_allgather(comm, send, recv, job.at.stream);
    out.bytes += sl.widest;
  };
  share.after = [&](size_t s) {
    const Slice& sl = l.slices[s];
    for (size_t j = 0; j < w; ++j)
      codec.decode_into(gathered + sl.gather_begin + j * sl.widest, sl.pieces[j].seg, o.bits,
                        job.data + sl.pieces[j].begin);
  };
  run_pipelined(count, share);
  return out;
}

}  // namespace quantization
}  // namespace ddph
