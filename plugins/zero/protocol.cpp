#include "plugins/zero/protocol.h"

#include <string>

#include "core/base/error.h"
#include "core/comm/comm_call.h"

namespace ddph {
namespace zero {

std::unique_ptr<ZeroProtocol> make_protocol(const ddph_hook_init_t& init,
                                            const ZeroOptions& options, Residuals& residuals,
                                            const char* who) {
  const ddph_hook_ref_t& inner = *init.inner;
  const char* inner_name = inner.hook->name ? inner.hook->name : "?";
  DDPH_CHECK(!(inner.hook->flags & DDPH_HOOK_RESULT_ELSEWHERE), DDPH_UNSUPPORTED,
             who << ": the wrapped hook '" << inner_name
                 << "' does not leave the reduced gradient in the bucket buffer "
                    "(DDPH_HOOK_RESULT_ELSEWHERE), so there is no gradient to step the "
                    "optimizer with; wrap a hook whose result lands in the bucket, e.g. "
                    "default/allreduce");
  if (options.protocol == Protocol::kAllreduce)
    return std::make_unique<AllreduceProtocol>(inner, init.comm, who);
  // The protocol averages the gradients itself; a wrapped hook that does
  // something else (compresses, skips) would be silently ignored.
  DDPH_CHECK(std::string(inner_name) == "allreduce", DDPH_INVALID_ARGUMENT,
             who << ": protocol reduce_scatter averages the gradients itself, as "
                    "default/allreduce does, so it wraps default/allreduce; it was given '"
                 << inner_name << "' (use protocol: allreduce to reduce with it)");
  DDPH_CHECK(options.bits == 32 || comm_can_alltoallv(init.comm), DDPH_UNSUPPORTED,
             who << ": bits " << options.bits
                 << " sends each rank its range in one alltoallv, which this "
                    "communicator has not (nor send/recv); use bits: 32");
  if (options.bits == 32) return std::make_unique<ReduceScatterProtocol>(init.comm, who);
  return std::make_unique<QuantizedReduceScatter>(init.comm, options, residuals, who);
}

}  // namespace zero
}  // namespace ddph
