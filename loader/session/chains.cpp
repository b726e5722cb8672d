#include "loader/session/chains.h"

#include <algorithm>

namespace ddph {
namespace loader {

void Chains::create(const ResolvedHook& resolved, bool is_rule, uint64_t max_bytes,
                    ddph_comm_t* comm, const ddph_device_allocator_t* device_allocator) {
  chains_.emplace_back();
  HookChain& chain = chains_.back();
  chain.is_rule = is_rule;
  chain.max_bytes = max_bytes;
  // create_elements appends inner elements as it goes; the outermost comes
  // last. Reverse so that elements read outer first.
  try {
    create_elements(resolved, comm, device_allocator, chain.elements);
  } catch (...) {
    std::reverse(chain.elements.begin(), chain.elements.end());  // so cleanup goes outer first
    throw;
  }
  std::reverse(chain.elements.begin(), chain.elements.end());
}

void Chains::destroy() {
  for (HookChain& chain : chains_) destroy_elements(chain.elements);  // outer first
  chains_.clear();
}

const HookChain& Chains::for_bytes(uint64_t bytes) const {
  for (const HookChain& chain : chains_)
    if (!chain.is_rule || bytes <= chain.max_bytes) return chain;
  return chains_.back();
}

std::vector<const ChainElement*> Chains::stateful() const {
  std::vector<const ChainElement*> hooks;
  for (const HookChain& chain : chains_) append_stateful(chain.elements, hooks);
  return hooks;
}

}  // namespace loader
}  // namespace ddph
