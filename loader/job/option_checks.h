// The ABI 1.5 check() of each hook and communicator a job names: options
// judged as a whole, before anything connects (ddph validate and
// ddph_session_open both come here through job.cpp). A plugin whose table
// predates 1.5, or offers no check, is not asked.
#pragma once

#include <ddph/ddph.h>

#include "loader/job/config.h"
#include "loader/job/job.h"

namespace ddph {
namespace loader {

// Checks `hook` and the hooks it wraps, outermost first: each inner hook is
// given the bucket dtype its wrapper hands it (the wrapper's
// inner_bucket_dtype, or else the dtype the wrapper itself was given).
// bucket_dtype: what the outermost hook gets; bits == 0 when not known.
// Each refusal is one problem, at the line of the option at fault, or at the
// hook's `name:` line when check() names no option.
void check_hook_options(const HookSpec& spec, const ResolvedHook& hook, DLDataType bucket_dtype,
                        Problems& problems);

// The same for the communicator factory (nothing when the host provides it).
void check_comm_options(const CommSpec& spec, const ResolvedComm& comm, Problems& problems);

}  // namespace loader
}  // namespace ddph
