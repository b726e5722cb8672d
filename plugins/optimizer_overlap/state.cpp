#include "plugins/optimizer_overlap/state.h"

#include "core/error.h"
#include "core/le_bytes.h"

namespace ddph {
namespace optimizer_overlap {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'H', 'O', 'P', 'T', 'M'};
constexpr const char* kBlob = "hook_then_optimizer state";

}  // namespace

std::string encode_state(const StateMap& states, OptimKind kind) {
  LeWriter w;
  put_frame_header(w, kMagic, kStateVersion);
  w.put(uint32_t(kind), 4);
  w.put(states.size(), 4);
  for (const auto& kv : states) {
    w.put(kv.first.first, 8);
    w.put(kv.first.second, 4);
    w.put(kv.second.step, 8);
    w.put_floats(kv.second.momentum);
    w.put_floats(kv.second.second);
    w.put_floats(kv.second.max_second);
  }
  return finish_frame(w);
}

StateMap decode_state(const void* bytes, size_t n, OptimKind kind) {
  LeReader body = open_frame(bytes, n, kMagic, kStateVersion, kBlob, "hook_then_optimizer");
  const uint64_t saved_kind = body.get(4, "the optimizer");
  DDPH_CHECK(saved_kind == uint32_t(kind), DDPH_INVALID_ARGUMENT,
             kBlob << ": saved by optimizer "
                   << (saved_kind <= 2 ? optim_name(OptimKind(saved_kind)) : "(unknown)")
                   << ", but this hook runs " << optim_name(kind));
  const uint64_t count = body.get(4, "the parameter count");
  StateMap states;
  for (uint64_t k = 0; k < count; ++k) {
    ParamKey key;
    key.first = body.get(8, "a bucket index");
    key.second = uint32_t(body.get(4, "a parameter position"));
    ParamState s;
    s.step = body.get(8, "a step count");
    s.momentum = body.get_floats("momentum");
    s.second = body.get_floats("exp_avg_sq");
    s.max_second = body.get_floats("max_exp_avg_sq");
    DDPH_CHECK(
        states.emplace(key, std::move(s)).second, DDPH_INVALID_ARGUMENT,
        kBlob << ": parameter " << key.second << " of bucket " << key.first << " appears twice");
  }
  DDPH_CHECK(body.left() == 0, DDPH_INVALID_ARGUMENT,
             kBlob << ": " << body.left() << " bytes after the last parameter");
  return states;
}

}  // namespace optimizer_overlap
}  // namespace ddph
