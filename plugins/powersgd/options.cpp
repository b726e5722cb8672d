#include "plugins/powersgd/options.h"

#include "core/base/error.h"
#include "core/base/option_check.h"
#include "core/base/options.h"

namespace ddph {
namespace powersgd {
namespace {

constexpr double kMaxInt = 9007199254740992.0;  // 2^53: exact in a YAML double

#define DDPH_PSGD_RANK_SPECS                                                                     \
  spec_int("rank", "1", "matrix_approximation_rank: columns of P and Q per matrix", 1, 1 << 20), \
      spec_int("start_iter", "1000",                                                             \
               "start_powerSGD_iter: plain allreduce (mean) for the steps before this one", 0,   \
               kMaxInt)

#define DDPH_PSGD_STATE_SPECS                                                                    \
  spec_bool("error_feedback", "true",                                                            \
            "add each rank's compression error of a bucket to that bucket next step"),           \
      spec_bool("warm_start", "true", "reuse last step's Q instead of a fresh random one"),      \
      spec_float("orthogonalization_epsilon", "0",                                               \
                 "added to column norms in Gram-Schmidt (rank <= 2); 0 is PyTorch's default", 0, \
                 1),                                                                             \
      spec_int("seed", "0", "random_seed of the Q draws, the same on every rank", 0, 4294967295.0)

}  // namespace

// min_compression_rate and batch_same_shape are per-matrix choices, so only
// the layer-wise hook has them (PyTorch's batched hook ignores both).
// Function-local statics: hook tables in other files take these pointers
// during their own static initialization.
OptionSpecs layerwise_specs() {
  static const ddph_option_spec_t specs[] = {
      DDPH_PSGD_RANK_SPECS,
      spec_float("min_compression_rate", "2", "compress an n x m matrix only if (n+m)*r*rate < n*m",
                 0, 1e30),
      DDPH_PSGD_STATE_SPECS,
      spec_bool("batch_same_shape", "false",
                "batch_tensors_with_same_shape: draw and multiply same-shaped matrices together"),
      spec_bool("overlap_rest", "false",
                "host buckets: 64 Ki or more uncompressed values travel in pieces, each on the "
                "wire while a pass over the matrices runs on a second thread; pays where each "
                "rank has a spare core and a slow link")};
  return specs;
}

OptionSpecs batched_specs() {
  static const ddph_option_spec_t specs[] = {DDPH_PSGD_RANK_SPECS, DDPH_PSGD_STATE_SPECS};
  return specs;
}

#undef DDPH_PSGD_RANK_SPECS
#undef DDPH_PSGD_STATE_SPECS

void check_options(OptionCheck& c, const char* hook) {
  const Options& o = c.options;
  const int64_t rank = o.get_int("rank");
  DDPH_CHECK_OPTION(c, rank >= 1, "rank",
                    "powersgd/" << hook << ": option 'rank' is " << rank << "; it must be >= 1");
  // PyTorch's rule (PowerSGDState) and reason: DDP rebuilds its buckets
  // after the first iteration, so an error or a Q remembered at iteration 0
  // or 1 would belong to a bucket layout that no longer exists.
  const int64_t start_iter = o.get_int("start_iter");
  const bool error_feedback = o.get_bool("error_feedback"), warm_start = o.get_bool("warm_start");
  DDPH_CHECK_OPTION(
      c, start_iter > 1 || !(error_feedback || warm_start), "start_iter",
      "powersgd/" << hook << ": option 'start_iter' is " << start_iter
                  << "; it must be > 1 when error_feedback or warm_start is on, because DDP "
                     "rebuilds its buckets after the first iteration and state remembered "
                     "before that would belong to the old bucket layout (PyTorch's "
                     "PowerSGDState refuses it too); set start_iter: 2 or more, or turn off "
                     "both error_feedback and warm_start");
}

PsgdOptions parse_options(const ddph_hook_init_t& init, bool layerwise) {
  Options o(init.options, init.num_options);
  PsgdOptions p;
  p.rank = int(o.get_int("rank"));
  p.start_iter = uint64_t(o.get_int("start_iter"));
  p.error_feedback = o.get_bool("error_feedback");
  p.warm_start = o.get_bool("warm_start");
  p.orthogonalization_epsilon = float(o.get_float("orthogonalization_epsilon"));
  p.seed = uint64_t(o.get_int("seed"));
  if (layerwise) {
    p.min_compression_rate = o.get_float("min_compression_rate");
    p.batch_same_shape = o.get_bool("batch_same_shape");
    p.overlap_rest = o.get_bool("overlap_rest");
  }
  return p;
}

}  // namespace powersgd
}  // namespace ddph
