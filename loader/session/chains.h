// A session's hook chains: the one for `hook`, and one per rule, each a hook
// and the hooks it wraps, created on the communicator the hooks get.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

#include "loader/job/job.h"
#include "loader/session/hook_chain.h"

namespace ddph {
namespace loader {

// Outermost hook first. Rule chains match buckets of at most max_bytes.
struct HookChain {
  ChainElements elements;
  bool is_rule = false;
  uint64_t max_bytes = 0;

  const ddph_hook_ref_t& outer() const { return elements.front()->ref; }
  const ddph_hook_ref_t& inner() const { return elements.back()->ref; }
};

class Chains {
 public:
  // Appends a chain; rules first (in YAML order), then the main chain. On a
  // throw, what was created stays for destroy().
  void create(const ResolvedHook& resolved, bool is_rule, uint64_t max_bytes, ddph_comm_t* comm,
              const ddph_device_allocator_t* device_allocator);
  // Destroys every hook, outer first in each chain.
  void destroy();
  // The first rule whose max_bytes holds `bytes`, else the main chain.
  const HookChain& for_bytes(uint64_t bytes) const;
  const std::vector<HookChain>& all() const { return chains_; }
  // The stateful hooks of every chain, in order (checkpoints).
  std::vector<const ChainElement*> stateful() const;

 private:
  std::vector<HookChain> chains_;
};

}  // namespace loader
}  // namespace ddph
