// The PowerSGD hooks' take_residual cases (residual_flush.h), shared by the
// host test and the GPU one.
#pragma once

#include "tests/support/residual_flush.h"

namespace ddph_test::psgd_flush {

// fp32 rounding over 5 steps of gradients in [-1, 1) and rank-2 products.
constexpr double kRounding = 1e-5;

// Two allreduce steps, then three compressed ones; a 64 x 32 matrix (what
// is compressed) and a bias of 32 (what travels uncompressed). Options as
// the hook names them: hook is powersgd or batched_powersgd, whose error
// buffer is padded to a square (46 x 46 for 2080 elements): the padding is
// no gradient and is not flushed.
inline FlushCase rank2(const char* hook, bool error_feedback) {
  return FlushCase{"powersgd",
                   hook,
                   {{"rank", "2"},
                    {"start_iter", "2"},
                    {"error_feedback", error_feedback ? "true" : "false"},
                    {"warm_start", "true"}},
                   {{64, 32}, {32}}};
}

}  // namespace ddph_test::psgd_flush
