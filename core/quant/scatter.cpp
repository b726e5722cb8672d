#include "core/quant/scatter.h"

#include <algorithm>

#include "core/comm/comm_call.h"
#include "core/comm/pipeline.h"
#include "core/quant/kernels/quant_math.h"  // mix64
#include "core/quant/rank_header.h"

namespace ddph {
namespace quantization {

// mix64 scatters nearby (rank, step, index) triples over unrelated
// counter ranges.
uint64_t counter_base(int rank, uint64_t step, uint64_t index) {
  const uint64_t h = mix64(mix64(mix64(uint64_t(uint32_t(rank))) ^ step) ^ index);
  return h << 32;
}

EncodeArgs own_encode_args(const OwnEncoding& e, const ScatterJob& job, size_t begin) {
  EncodeArgs a;
  a.bits = e.bits;
  a.stochastic = e.stochastic;
  a.seed = e.seed;
  a.counter_base = counter_base(job.rank, job.step, job.index) + begin;
  a.residual = job.residual != nullptr ? job.residual + begin : nullptr;
  a.residual_in =
      job.residual != nullptr && job.residual_in != nullptr ? job.residual_in + begin : nullptr;
  return a;
}

ScatterLayout lay_out_scatter(const std::vector<Chunk>& chunks, size_t channel_size, int bits,
                              int rank, size_t slices) {
  const size_t w = chunks.size(), me = size_t(rank);
  ScatterLayout l;
  l.chunks = chunks;
  std::vector<std::vector<Chunk>> pieces(w);  // pieces[j][s]
  for (size_t j = 0; j < w; ++j)
    pieces[j] =
        slices == 1 ? std::vector<Chunk>{chunks[j]} : split_pieces(chunks[j], channel_size, slices);
  l.slices.resize(slices);
  for (size_t s = 0; s < slices; ++s) {
    ScatterSlice& sl = l.slices[s];
    sl.send_begin = l.send_bytes;
    for (size_t j = 0; j < w; ++j) {
      const Chunk& p = pieces[j][s];
      const size_t bytes = encoded_bytes(p.seg, bits);
      sl.pieces.push_back(p);
      sl.send_at.push_back(l.send_bytes);
      sl.send_counts.push_back(int64_t(kRankHeaderBytes + bytes));
      l.send_bytes += kRankHeaderBytes + bytes;
      sl.widest = std::max(sl.widest, bytes);
      l.longest = std::max(l.longest, p.seg.n);
      l.most_channels = std::max(l.most_channels, segment_channels(p.seg));
    }
    sl.send_bytes = l.send_bytes - sl.send_begin;
    sl.mine_bytes = size_t(sl.send_counts[me]);
    sl.recv_begin = l.recv_bytes;
    l.recv_bytes += w * sl.mine_bytes;
    sl.gather_begin = l.gather_bytes;
    l.gather_bytes += w * sl.widest;
  }
  return l;
}

size_t scatter_slice_count(const ScatterJob& job, size_t channel_size, size_t requested) {
  if (job.at.cuda() || channel_size == 0) return 1;
  if (requested != 0) return requested;
  const size_t auto_slices = job.n * sizeof(float) / (size_t(8) << 20);
  return std::min<size_t>(4, std::max<size_t>(1, auto_slices));
}

Scattered scatter_encoded(ddph_comm_t* comm, const OwnEncoding& e, const ScatterJob& job,
                          const ScatterLayout& l, Codec& codec, ScratchBuffers& scratch) {
  const size_t w = size_t(job.world);
  Scattered out{scratch.get(job.at, kScatterSendKey, l.send_bytes),
                scratch.get(job.at, kScatterRecvKey, l.recv_bytes),
                0,
                {}};
  uint8_t* sent = static_cast<uint8_t*>(out.sent.data());
  uint8_t* received = static_cast<uint8_t*>(out.received.data());
  PipelineStages trade;
  trade.before = [&](size_t s) {
    const ScatterSlice& sl = l.slices[s];
    for (size_t j = 0; j < w; ++j)
      codec.encode(job.data + sl.pieces[j].begin, sl.pieces[j].seg,
                   own_encode_args(e, job, sl.pieces[j].begin),
                   sent + sl.send_at[j] + kRankHeaderBytes);
    // The tally covers every piece encoded so far: the last slice's headers
    // speak for the whole bucket.
    for (size_t j = 0; j < w; ++j) codec.write_rank_header(sent + sl.send_at[j]);
  };
  trade.transfer = [&](size_t s) {
    const ScatterSlice& sl = l.slices[s];
    FlatTensor send(sent + sl.send_begin, DType::U8, int64_t(sl.send_bytes), job.at.device);
    FlatTensor recv(received + sl.recv_begin, DType::U8, int64_t(w * sl.mine_bytes), job.at.device);
    const std::vector<int64_t> recv_counts(w, int64_t(sl.mine_bytes));
    comm_alltoallv(comm, send, sl.send_counts, recv, recv_counts, job.at.stream);
    out.bytes += sl.send_bytes - sl.mine_bytes;  // the own contribution stays local
  };
  run_pipelined(l.slices.size(), trade);
  const ScatterSlice& last = l.slices.back();
  out.nonfinite_ranks =
      codec.nonfinite_senders(received + last.recv_begin, last.mine_bytes, job.world);
  return out;
}

}  // namespace quantization
}  // namespace ddph
