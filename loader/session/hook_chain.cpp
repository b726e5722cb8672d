#include "loader/session/hook_chain.h"

#include <algorithm>
#include <cstring>

#include "core/base/error.h"
#include "core/base/host.h"
#include "loader/registry/registry.h"
#include "loader/session/state_blob.h"

namespace ddph {
namespace loader {
namespace {

void append_to_string(void* sink, const void* bytes, size_t n) {
  if (n != 0) static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
}

// A chain made through make_inner, handed to its wrapper as one hook: the
// wrapper runs, checkpoints and destroys the whole chain through it without
// knowing how many hooks it holds.
struct MadeChain {
  ddph_hook_t table{};
  ChainElements elements;  // outer first

  const ddph_hook_ref_t& outer() const { return elements.front()->ref; }

  static MadeChain* of(void* state, const char* what) {
    DDPH_CHECK(state != nullptr, DDPH_INVALID_ARGUMENT, what << ": state is NULL");
    return static_cast<MadeChain*>(state);
  }
  static ddph_error_t* run_bucket(void* state, const ddph_bucket_t* bucket, ddph_done_fn done,
                                  void* user) {
    MadeChain* chain = nullptr;
    ddph_error_t* e = guard([&] { chain = of(state, "run_bucket"); });
    if (e != nullptr) return e;
    const ddph_hook_ref_t& o = chain->outer();
    return o.hook->run_bucket(o.state, bucket, done, user);
  }
  static void destroy(void* state) {
    auto* chain = static_cast<MadeChain*>(state);
    if (chain == nullptr) return;
    destroy_elements(chain->elements);
    delete chain;
  }
  static ddph_error_t* save_state(void* state, ddph_write_fn write, void* sink) {
    return guard([&] {
      MadeChain* chain = of(state, "save_state");
      DDPH_CHECK(write != nullptr, DDPH_INVALID_ARGUMENT, "save_state: write is NULL");
      std::vector<const ChainElement*> hooks;
      append_stateful(chain->elements, hooks);
      const std::string blob = save_states(hooks);
      write(sink, blob.data(), blob.size());
    });
  }
  static ddph_error_t* load_state(void* state, const void* bytes, size_t n) {
    return guard([&] {
      MadeChain* chain = of(state, "load_state");
      std::vector<const ChainElement*> hooks;
      append_stateful(chain->elements, hooks);
      load_states(hooks, bytes, n);
    });
  }
  static ddph_error_t* take_residual(void* state, const ddph_bucket_t* bucket) {
    MadeChain* chain = nullptr;
    ddph_error_t* e = guard([&] {
      chain = of(state, "take_residual");
      DDPH_CHECK(bucket != nullptr, DDPH_INVALID_ARGUMENT, "take_residual: bucket is NULL");
    });
    return e != nullptr ? e : take_residuals(chain->elements, *bucket);
  }
  // As the session counts a chain: bytes in as the outermost hook saw them,
  // bytes out the larger of the outermost's count (a wrapper's includes its
  // inner's, and zero's reduce_scatter sends instead of its inner) and the
  // innermost's (the hook that talks to collectives).
  static ddph_error_t* stats(void* state, ddph_stats_t* out) {
    return guard([&] {
      MadeChain* chain = of(state, "stats");
      DDPH_CHECK(out != nullptr && out->struct_size >= DDPH_STATS_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
                 "stats: out is NULL or older than v1.0");
      ddph_stats_t s{};
      s.struct_size = sizeof s;
      const ddph_hook_ref_t& o = chain->outer();
      const ddph_hook_ref_t& i = chain->elements.back()->ref;
      ddph_stats_t hs{};
      hs.struct_size = sizeof hs;
      if (o.hook->stats != nullptr) {
        DDPH_CALL(o.hook->stats(o.state, &hs));
        s.bytes_in = hs.bytes_in;
        s.bytes_out = hs.bytes_out;
        s.steps = hs.steps;
        s.buckets = hs.buckets;
      }
      hs = ddph_stats_t{};
      hs.struct_size = sizeof hs;
      if (i.hook->stats != nullptr) {
        DDPH_CALL(i.hook->stats(i.state, &hs));
        s.bytes_out = std::max(s.bytes_out, hs.bytes_out);
      }
      s.struct_size = out->struct_size;
      std::memcpy(out, &s, std::min(sizeof s, size_t(out->struct_size)));
      out->struct_size = s.struct_size;
    });
  }

  // The table reads like the outer hook's, with the needs of the whole chain.
  void fill_table() {
    const ddph_hook_t& o = *outer().hook;
    uint32_t needs = 0;
    for (const auto& e : elements)
      needs |= e->ref.hook->flags &
               (DDPH_HOOK_NEEDS_PARAMS | DDPH_HOOK_RESULT_ELSEWHERE | DDPH_HOOK_STEPS_OPTIMIZER);
    table.struct_size = sizeof table;
    table.name = o.name;
    table.summary = o.summary;
    table.flags = (o.flags & ~(DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_MAKES_INNER)) | needs;
    table.create = nullptr;  // made only through make_inner
    table.run_bucket = &run_bucket;
    table.destroy = &destroy;
    bool keeps_state = false;
    for (const auto& e : elements) keeps_state |= e->ref.hook->save_state != nullptr;
    table.save_state = keeps_state ? &save_state : nullptr;
    table.load_state = keeps_state ? &load_state : nullptr;
    table.stats = &stats;
    // 1.10: the chain hands back its hooks' residuals when one of them can.
    for (const auto& e : elements)
      if (e->ref.hook->struct_size >= DDPH_HOOK_SIZE_V1_10 && e->ref.hook->take_residual != nullptr)
        table.take_residual = &take_residual;
  }
};

ddph_error_t* make_inner(void* inner_ctx, ddph_comm_t* comm, ddph_hook_ref_t* out) {
  return guard([&] {
    DDPH_CHECK(out != nullptr, DDPH_INVALID_ARGUMENT, "make_inner: out is NULL");
    *out = ddph_hook_ref_t{};
    DDPH_CHECK(inner_ctx != nullptr, DDPH_INVALID_ARGUMENT, "make_inner: inner_ctx is NULL");
    DDPH_CHECK(comm != nullptr && comm->struct_size >= DDPH_COMM_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
               "make_inner: comm is NULL or older than v1.0");
    const auto* maker = static_cast<const InnerMaker*>(inner_ctx);
    auto chain = std::make_unique<MadeChain>();
    try {
      create_elements(*maker->inner, comm, maker->device_allocator, chain->elements);
    } catch (...) {
      std::reverse(chain->elements.begin(), chain->elements.end());
      destroy_elements(chain->elements);
      throw;
    }
    std::reverse(chain->elements.begin(), chain->elements.end());
    chain->fill_table();
    out->hook = &chain->table;
    out->state = chain.release();
  });
}

}  // namespace

void create_elements(const ResolvedHook& resolved, ddph_comm_t* comm,
                     const ddph_device_allocator_t* device_allocator, ChainElements& elements) {
  auto element = std::make_unique<ChainElement>();
  element->plugin = resolved.plugin;
  ddph_hook_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.comm = comm;
  init.options = resolved.options.data();
  init.num_options = resolved.options.size();
  init.device_allocator = device_allocator;
  if (resolved.hook->flags & DDPH_HOOK_MAKES_INNER) {
    // The wrapper makes its inner chain itself, on a communicator of its own.
    element->maker = std::make_unique<InnerMaker>();
    element->maker->inner = resolved.inner.get();
    element->maker->device_allocator = device_allocator;
    init.make_inner = &make_inner;
    init.inner_ctx = element->maker.get();
  } else if (resolved.inner) {
    create_elements(*resolved.inner, comm, device_allocator, elements);
    init.inner = &elements.back()->ref;
  }
  void* state = nullptr;
  DDPH_CALL(resolved.hook->create(&init, &state));
  element->ref.hook = resolved.hook;
  element->ref.state = state;
  elements.push_back(std::move(element));
}

void destroy_elements(ChainElements& elements) {
  for (auto& element : elements) {
    if (element->ref.state != nullptr) element->ref.hook->destroy(element->ref.state);
    element->ref.state = nullptr;
  }
  elements.clear();
}

ddph_error_t* take_residuals(const ChainElements& elements, const ddph_bucket_t& bucket) noexcept {
  for (const auto& element : elements) {
    const ddph_hook_ref_t& ref = element->ref;
    if (ref.hook->struct_size < DDPH_HOOK_SIZE_V1_10 || ref.hook->take_residual == nullptr)
      continue;
    if (ddph_error_t* e = ref.hook->take_residual(ref.state, &bucket)) return e;
  }
  return nullptr;
}

void append_stateful(const ChainElements& elements, std::vector<const ChainElement*>& out) {
  for (const auto& element : elements)
    if (element->ref.hook->save_state != nullptr && element->ref.hook->load_state != nullptr)
      out.push_back(element.get());
}

std::string save_states(const std::vector<const ChainElement*>& hooks) {
  return encode_state(state_records(hooks));
}

std::vector<StateRecord> state_records(const std::vector<const ChainElement*>& hooks) {
  std::vector<StateRecord> records;
  for (const ChainElement* element : hooks) {
    StateRecord r{element->plugin->family(), element->ref.hook->name, {}};
    DDPH_CALL(element->ref.hook->save_state(element->ref.state, &append_to_string, &r.blob));
    records.push_back(std::move(r));
  }
  return records;
}

void load_states(const std::vector<const ChainElement*>& hooks, const void* bytes, size_t n) {
  load_records(hooks, decode_state(bytes, n));
}

void load_records(const std::vector<const ChainElement*>& hooks,
                  const std::vector<StateRecord>& records) {
  DDPH_CHECK(records.size() <= hooks.size(), DDPH_INVALID_ARGUMENT,
             "state blob holds " << records.size() << " hook states, but this session has "
                                 << hooks.size() << " stateful hooks");
  for (size_t i = 0; i < hooks.size(); ++i) {
    const ChainElement& e = *hooks[i];
    DDPH_CHECK(i < records.size(), DDPH_INVALID_ARGUMENT,
               "state blob holds " << records.size()
                                   << " hook states, but this session has more stateful hooks "
                                      "(next: "
                                   << e.plugin->family() << "/" << e.ref.hook->name << ")");
    const StateRecord& r = records[i];
    DDPH_CHECK(r.family == e.plugin->family() && r.hook == e.ref.hook->name, DDPH_INVALID_ARGUMENT,
               "state blob record " << i << " is for hook " << r.family << "/" << r.hook
                                    << ", but the session's hook there is " << e.plugin->family()
                                    << "/" << e.ref.hook->name);
  }
  for (size_t i = 0; i < hooks.size(); ++i)
    DDPH_CALL(hooks[i]->ref.hook->load_state(hooks[i]->ref.state, records[i].blob.data(),
                                             records[i].blob.size()));
}

}  // namespace loader
}  // namespace ddph
