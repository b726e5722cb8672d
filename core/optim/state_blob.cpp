#include "core/optim/state_blob.h"

#include "core/base/error.h"
#include "core/base/le_bytes.h"

namespace ddph {
namespace optim {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'O', 'P', 'T', 'M'};
constexpr const char* kBlob = "hook_then_optimizer state";

}  // namespace

std::string key_text(const ParamKey& k) {
  return k.by_id ? "parameter id " + std::to_string(int64_t(k.id_or_bucket))
                 : "parameter " + std::to_string(k.position_in_bucket) + " of bucket " +
                       std::to_string(k.id_or_bucket);
}

std::string encode_state(const StateMap& states, OptimKind kind) {
  LeWriter w;
  put_frame_header(w, kMagic, kStateVersion);
  w.put(uint32_t(kind), 4);
  w.put(states.size(), 4);
  for (const auto& kv : states) {
    w.put(kv.first.by_id ? 1 : 0, 1);
    w.put(kv.first.id_or_bucket, 8);
    if (!kv.first.by_id) w.put(kv.first.position_in_bucket, 4);
    w.put(kv.second.step, 8);
    w.put_floats(kv.second.momentum);
    w.put_floats(kv.second.second);
    w.put_floats(kv.second.max_second);
  }
  return finish_frame(w);
}

StateMap decode_state(const void* bytes, size_t n, OptimKind kind) {
  uint32_t version = 0;
  LeReader body =
      open_frame(bytes, n, kMagic, 1, kStateVersion, kBlob, "hook_then_optimizer", &version);
  const uint64_t saved_kind = body.get(4, "the optimizer");
  DDPH_CHECK(saved_kind == uint32_t(kind), DDPH_INVALID_ARGUMENT,
             kBlob << ": saved by optimizer "
                   << (saved_kind <= 2 ? optim_name(OptimKind(saved_kind)) : "(unknown)")
                   << ", but this hook runs " << optim_name(kind));
  const uint64_t count = body.get(4, "the parameter count");
  StateMap states;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t kind = version >= 2 ? body.get(1, "a key kind") : 0;
    DDPH_CHECK(kind <= 1, DDPH_INVALID_ARGUMENT,
               kBlob << ": key kind " << kind << " is neither 0 (position) nor 1 (id)");
    ParamKey key{kind == 1, 0, 0};
    key.id_or_bucket = body.get(8, key.by_id ? "a parameter id" : "a bucket index");
    if (!key.by_id) key.position_in_bucket = uint32_t(body.get(4, "a parameter position"));
    ParamState s;
    s.step = body.get(8, "a step count");
    s.momentum = body.get_floats("momentum");
    s.second = body.get_floats("exp_avg_sq");
    s.max_second = body.get_floats("max_exp_avg_sq");
    if (key.by_id)
      DDPH_CHECK(states.emplace(key, std::move(s)).second, DDPH_INVALID_ARGUMENT,
                 kBlob << ": parameter id " << int64_t(key.id_or_bucket) << " appears twice");
    else
      DDPH_CHECK(states.emplace(key, std::move(s)).second, DDPH_INVALID_ARGUMENT,
                 kBlob << ": parameter " << key.position_in_bucket << " of bucket "
                       << key.id_or_bucket << " appears twice");
  }
  DDPH_CHECK(body.left() == 0, DDPH_INVALID_ARGUMENT,
             kBlob << ": " << body.left() << " bytes after the last parameter");
  return states;
}

}  // namespace optim
}  // namespace ddph
