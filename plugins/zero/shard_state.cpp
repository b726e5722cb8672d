#include "plugins/zero/shard_state.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace zero {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'Z', 'E', 'R', 'O'};
constexpr char kFullMagic[8] = {'D', 'D', 'P', 'H', 'O', 'P', 'T', 'M'};
constexpr const char* kBlob = "zero state shard";
constexpr size_t kLengthAt = 12;  // after the magic and the version

}  // namespace

std::string run_id_text(uint64_t run_id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(run_id));
  return text;
}

Shard decode_shard(const void* bytes, size_t n, optim::OptimKind kind, const char* who) {
  uint32_t version = 0;
  LeReader body = open_frame(bytes, n, kMagic, 1, kShardVersion, kBlob, who, &version);
  const uint64_t length = body.get(8, "the shard length");
  DDPH_CHECK(length == n, DDPH_INVALID_ARGUMENT,
             kBlob << ": says it is " << length << " bytes long, but is " << n);
  Shard s;
  const uint64_t saved_kind = body.get(4, "the optimizer");
  DDPH_CHECK(
      saved_kind == uint32_t(kind), DDPH_INVALID_ARGUMENT,
      who << ": the checkpoint was saved by optimizer "
          << (saved_kind <= 2 ? optim::optim_name(optim::OptimKind(saved_kind)) : "(unknown)")
          << ", but this hook runs " << optim::optim_name(kind));
  s.kind = kind;
  s.world = uint32_t(body.get(4, "the world size"));
  s.rank = uint32_t(body.get(4, "the rank"));
  DDPH_CHECK(s.world >= 1 && s.rank < s.world, DDPH_INVALID_ARGUMENT,
             kBlob << ": rank " << s.rank << " of a world of " << s.world);
  s.layout_hash = body.get(8, "the layout hash");
  if (version >= 3) s.run_id = body.get(8, "the run id");
  const uint64_t count = body.get(4, "the piece count");
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t key_kind = body.get(1, "a key kind");
    DDPH_CHECK(key_kind <= 1, DDPH_INVALID_ARGUMENT,
               kBlob << ": key kind " << key_kind << " is neither 0 (position) nor 1 (id)");
    PieceKey key{{key_kind == 1, 0, 0}, 0};
    key.param.id_or_bucket = body.get(8, "a parameter key");
    key.param.position_in_bucket = uint32_t(body.get(4, "a parameter position"));
    key.begin = body.get(8, "a piece's first element");
    PieceState p;
    p.count = body.get(8, "a piece's element count");
    p.state.step = body.get(8, "a step count");
    p.state.momentum = body.get_floats("momentum");
    p.state.second = body.get_floats("exp_avg_sq");
    p.state.max_second = body.get_floats("max_exp_avg_sq");
    for (const std::vector<float>* v : {&p.state.momentum, &p.state.second, &p.state.max_second})
      DDPH_CHECK(v->empty() || v->size() == p.count, DDPH_INVALID_ARGUMENT,
                 kBlob << ": a buffer of " << optim::key_text(key.param) << " holds " << v->size()
                       << " values for a piece of " << p.count);
    DDPH_CHECK(s.pieces.emplace(key, std::move(p)).second, DDPH_INVALID_ARGUMENT,
               kBlob << ": " << optim::key_text(key.param) << " from element " << key.begin
                     << " appears twice");
  }
  if (version >= 2) {
    const uint64_t residuals = body.get(4, "the residual count");
    for (uint64_t k = 0; k < residuals; ++k) {
      const uint64_t index = body.get(8, "a residual's bucket index");
      std::vector<float> r = body.get_floats("a residual");
      DDPH_CHECK(s.residuals.emplace(index, std::move(r)).second, DDPH_INVALID_ARGUMENT,
                 kBlob << ": the residual of bucket " << index << " appears twice");
    }
  }
  DDPH_CHECK(body.left() == 0, DDPH_INVALID_ARGUMENT,
             kBlob << ": " << body.left() << " bytes after the last "
                   << (version >= 2 ? "residual" : "piece"));
  return s;
}

// Joins the pieces of each parameter in element order into its whole state.
optim::StateMap join_pieces(const std::vector<Shard>& shards, const char* who) {
  std::map<optim::ParamKey, std::vector<std::pair<uint64_t, const PieceState*>>> by_param;
  for (const Shard& s : shards)
    for (const auto& kv : s.pieces)
      by_param[kv.first.param].push_back({kv.first.begin, &kv.second});
  optim::StateMap out;
  for (auto& kv : by_param) {
    auto& pieces = kv.second;
    std::sort(pieces.begin(), pieces.end());
    optim::ParamState whole;
    whole.step = pieces.front().second->state.step;
    uint64_t next = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const PieceState& p = *pieces[i].second;
      DDPH_CHECK(pieces[i].first == next, DDPH_INVALID_ARGUMENT,
                 who << ": the joined shards hold " << optim::key_text(kv.first) << " from element "
                     << pieces[i].first << " but end the piece before at element " << next
                     << ": the shards do not tile the parameter");
      DDPH_CHECK(p.state.step == whole.step, DDPH_INVALID_ARGUMENT,
                 who << ": the pieces of " << optim::key_text(kv.first) << " were stepped "
                     << whole.step << " and " << p.state.step
                     << " times: the shards come from different steps");
      auto append = [&](std::vector<float>& into, const std::vector<float>& from,
                        const char* name) {
        DDPH_CHECK(i == 0 || from.empty() == into.empty(), DDPH_INVALID_ARGUMENT,
                   who << ": " << optim::key_text(kv.first) << " has " << name
                       << " in some pieces but not in others");
        into.insert(into.end(), from.begin(), from.end());
      };
      append(whole.momentum, p.state.momentum, "a momentum buffer");
      append(whole.second, p.state.second, "exp_avg_sq");
      append(whole.max_second, p.state.max_second, "max_exp_avg_sq");
      next += p.count;
    }
    out.emplace(kv.first, std::move(whole));
  }
  return out;
}

std::string encode_shard(const Shard& shard) {
  LeWriter body;
  body.put(uint32_t(shard.kind), 4);
  body.put(shard.world, 4);
  body.put(shard.rank, 4);
  body.put(shard.layout_hash, 8);
  body.put(shard.run_id, 8);
  body.put(shard.pieces.size(), 4);
  for (const auto& kv : shard.pieces) {
    body.put(kv.first.param.by_id ? 1 : 0, 1);
    body.put(kv.first.param.id_or_bucket, 8);
    body.put(kv.first.param.position_in_bucket, 4);
    body.put(kv.first.begin, 8);
    body.put(kv.second.count, 8);
    body.put(kv.second.state.step, 8);
    body.put_floats(kv.second.state.momentum);
    body.put_floats(kv.second.state.second);
    body.put_floats(kv.second.state.max_second);
  }
  body.put(shard.residuals.size(), 4);
  for (const auto& kv : shard.residuals) {
    body.put(kv.first, 8);
    body.put_floats(kv.second);
  }
  LeWriter w;
  put_frame_header(w, kMagic, kShardVersion);
  w.put(kLengthAt + 8 + body.bytes().size() + 8, 8);
  w.put_bytes(body.bytes().data(), body.bytes().size());
  return finish_frame(w);
}

LoadedState decode_loaded(const void* bytes, size_t n, optim::OptimKind kind, const char* who) {
  const uint8_t* p = static_cast<const uint8_t*>(bytes);
  LoadedState out;
  if (n >= 8 && std::memcmp(p, kFullMagic, 8) == 0) {
    out.full = optim::decode_state(bytes, n, kind);
    return out;
  }
  std::vector<Shard> shards;
  size_t at = 0;
  while (at < n) {
    DDPH_CHECK(n - at >= kLengthAt + 8 && std::memcmp(p + at, kMagic, 8) == 0,
               DDPH_INVALID_ARGUMENT,
               who << ": byte " << at
                   << " does not start a zero state shard (nor is the blob a full optimizer "
                      "state): the checkpoint is not this hook's, or it is corrupt");
    LeReader length(p + at + kLengthAt, 8, kBlob);
    const uint64_t len = length.get(8, "the shard length");
    DDPH_CHECK(len >= kLengthAt + 16 && len <= n - at, DDPH_INVALID_ARGUMENT,
               kBlob << " at byte " << at << ": length " << len << " runs past the " << n - at
                     << " bytes left");
    shards.push_back(decode_shard(p + at, size_t(len), kind, who));
    at += size_t(len);
  }
  DDPH_CHECK(!shards.empty(), DDPH_INVALID_ARGUMENT, who << ": the checkpoint is empty");
  if (shards.size() == 1) {
    out.single_shard = true;
    out.shard = std::move(shards.front());
    return out;
  }
  const Shard& first = shards.front();
  std::set<uint32_t> ranks;
  for (const Shard& s : shards) {
    DDPH_CHECK(s.world == first.world && s.layout_hash == first.layout_hash, DDPH_INVALID_ARGUMENT,
               who << ": the joined shards come from different jobs or layouts (a world of "
                   << first.world << " and of " << s.world << ", or another bucket layout)");
    DDPH_CHECK(s.run_id == 0 || first.run_id == 0 || s.run_id == first.run_id,
               DDPH_INVALID_ARGUMENT,
               who << ": the joined shards come from different runs: rank " << first.rank
                   << "'s shard is of run " << run_id_text(first.run_id) << ", rank " << s.rank
                   << "'s of run " << run_id_text(s.run_id)
                   << "; join the shards that the ranks of one run saved at one step");
    if (out.run_id == 0) out.run_id = s.run_id;
    DDPH_CHECK(ranks.insert(s.rank).second, DDPH_INVALID_ARGUMENT,
               who << ": the joined shards hold rank " << s.rank << "'s shard twice");
  }
  DDPH_CHECK(ranks.size() == first.world, DDPH_INVALID_ARGUMENT,
             who << ": the joined shards hold " << ranks.size() << " of the " << first.world
                 << " ranks' shards; join every rank's shard");
  out.full = join_pieces(shards, who);
  return out;
}

PieceState slice_state(const optim::ParamState& whole, size_t numel, size_t begin, size_t count,
                       const char* who) {
  PieceState p;
  p.count = count;
  p.state.step = whole.step;
  auto slice = [&](const std::vector<float>& from, std::vector<float>& into) {
    if (from.empty()) return;
    DDPH_CHECK(from.size() == numel, DDPH_INVALID_ARGUMENT,
               who << ": the checkpoint holds " << from.size()
                   << " values of a parameter's optimizer state, but the parameter has " << numel
                   << " elements: it is a checkpoint of another model");
    into.assign(from.begin() + long(begin), from.begin() + long(begin + count));
  };
  slice(whole.momentum, p.state.momentum);
  slice(whole.second, p.state.second);
  slice(whole.max_second, p.state.max_second);
  return p;
}

}  // namespace zero
}  // namespace ddph
