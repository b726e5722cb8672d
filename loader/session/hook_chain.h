// Creating, destroying and checkpointing the hooks of one chain (a hook and
// the hooks it wraps), on a communicator given by the caller: the session's
// for its chains, a wrapper's own for the chains it makes through
// ddph_hook_init_t.make_inner (ABI 1.2, DDPH_HOOK_MAKES_INNER).
#pragma once

#include <ddph/ddph.h>

#include <memory>
#include <string>
#include <vector>

#include "loader/job/job.h"
#include "loader/session/state_blob.h"

namespace ddph {
namespace loader {

// What a DDPH_HOOK_MAKES_INNER wrapper's make_inner (init.inner_ctx) makes:
// the chain named under its `wrap:`.
struct InnerMaker {
  const ResolvedHook* inner = nullptr;  // owned by the job, which outlives every hook
  const ddph_device_allocator_t* device_allocator = nullptr;  // the session's, or NULL
};

// One created hook: table, state, and the ref a wrapper's init.inner points at.
struct ChainElement {
  const Plugin* plugin = nullptr;
  ddph_hook_ref_t ref{};
  std::unique_ptr<InnerMaker> maker;  // set for a MAKES_INNER wrapper
};

using ChainElements = std::vector<std::unique_ptr<ChainElement>>;

// Creates `resolved` on comm, innermost hook first (a wrapper's create()
// receives its created inner hook), appending each to `elements`: the
// outermost comes last. A MAKES_INNER wrapper gets make_inner instead of its
// inner hook, which is then not created here. On a throw, what was created
// stays in `elements` for the caller to destroy. Every hook gets
// device_allocator (the host's, ABI 1.3, or NULL) in its init.
void create_elements(const ResolvedHook& resolved, ddph_comm_t* comm,
                     const ddph_device_allocator_t* device_allocator, ChainElements& elements);

// Destroys the states, in the order of `elements` (outer first: a wrapper may
// use its inner hook while it goes), and clears them.
void destroy_elements(ChainElements& elements);

// ABI 1.10: each hook of elements that offers take_residual (struct_size
// >= DDPH_HOOK_SIZE_V1_10, not NULL) adds the error-feedback residual it
// keeps for bucket.index into bucket.buffer and forgets it, outer first.
// For the auto chooser when it moves a bucket away from this chain. Stops
// at the first error and returns it (owned by the caller); NULL when all
// succeed, or when no hook keeps a residual.
ddph_error_t* take_residuals(const ChainElements& elements, const ddph_bucket_t& bucket) noexcept;

// The stateful hooks (save_state set) of elements, appended to `out` in order.
void append_stateful(const ChainElements& elements, std::vector<const ChainElement*>& out);
// One state container (state_blob.h) holding the states of `hooks`, in order.
std::string save_states(const std::vector<const ChainElement*>& hooks);
// The records of that container, for a caller that adds its own.
std::vector<StateRecord> state_records(const std::vector<const ChainElement*>& hooks);
// Loads a container made by save_states into `hooks`: every record is
// checked against its hook's family and name before any is loaded.
void load_states(const std::vector<const ChainElement*>& hooks, const void* bytes, size_t n);
void load_records(const std::vector<const ChainElement*>& hooks,
                  const std::vector<StateRecord>& records);

}  // namespace loader
}  // namespace ddph
