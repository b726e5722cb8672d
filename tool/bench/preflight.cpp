#include "tool/bench/preflight.h"

#include <algorithm>
#include <cstring>

#include "core/base/options.h"
#include "loader/job/job.h"
#include "tool/bench/params.h"

namespace ddph::tool {
namespace {

// The chain the session runs on a bucket of `bytes` (Session::chain_for):
// the first rule that matches, else the job's hook.
const ddph::loader::ResolvedHook& chain_for(const ddph::loader::Job& job, int64_t bytes) {
  for (const ddph::loader::ResolvedRule& rule : job.rules)
    if (uint64_t(bytes) <= rule.max_bytes) return *rule.hook;
  return main_hook(job);
}

// Whether the layer-wise hook factors any parameter of the bench's bucket,
// by its rule (plugins/powersgd/bucket_plan.cpp): an n x m view (a 1-D one
// is n x 1) is compressed when (n + m) * min(n, m, rank) * rate < n * m.
bool factors_any(const BenchShape& shape, int64_t rank, double rate) {
  const BenchParams params(shape.numel, shape.matrix_rows, shape.matrix_cols);
  for (const std::vector<int64_t>* s : params.shapes()) {
    const int64_t n = (*s)[0], m = s->size() > 1 ? (*s)[1] : 1;
    const int64_t r = std::min(std::min(n, m), rank);
    if (double(n + m) * double(r) * rate < double(n) * double(m)) return true;
  }
  return false;
}

}  // namespace

std::vector<CompressionForecast> forecast_compression(const std::string& config_path,
                                                      const BenchShape& shape) {
  ddph::loader::ConfigSource source;
  source.path = config_path;
  const ddph::loader::Job job = ddph::loader::load_job(source);
  std::vector<CompressionForecast> out;
  for (const ddph::loader::ResolvedHook* e = &chain_for(job, shape.bucket_bytes); e != nullptr;
       e = e->inner.get()) {
    if (e->plugin == nullptr || e->plugin->family() != "powersgd") continue;
    const ddph::Options opts(e->options.data(), e->options.size());
    const std::string hook = "powersgd/" + std::string(e->hook->name);
    const bool layerwise = std::strcmp(e->hook->name, "powersgd") == 0;
    const int64_t rank = opts.get_int("rank");
    // Steps (0-based, one bucket each) below start_iter are plain allreduce;
    // the timed ones are warmup .. warmup + iters - 1.
    const int64_t start = opts.get_int("start_iter");
    const int64_t end = int64_t(shape.warmup) + shape.iters;
    const int64_t compressed = std::max<int64_t>(0, end - std::max<int64_t>(start, shape.warmup));
    CompressionForecast f{hook, false, ""};
    if (layerwise && !factors_any(shape, rank, opts.get_float("min_compression_rate"))) {
      f.nothing = true;
      if (shape.matrix_rows == 0)
        f.why =
            "the bucket is one flat gradient, and the layer-wise hook sends 1-D gradients "
            "whole (no matrix to factor): pass --matrix ROWSxCOLS (e.g. --matrix 1024x1024) "
            "to tile it with the matrices a model's layers would give, or bench name: "
            "batched_powersgd, which factors the whole bucket as one matrix";
      else
        f.why = "--matrix " + std::to_string(shape.matrix_rows) + "x" +
                std::to_string(shape.matrix_cols) + " at rank " + std::to_string(rank) +
                " is below min_compression_rate (it would send (rows + cols) x rank floats "
                "for no gain): pass a larger --matrix, or lower min_compression_rate";
    }
    if (compressed < shape.iters) {
      f.nothing = f.nothing || compressed == 0;
      f.why += std::string(f.why.empty() ? "" : "; and ") + "its steps before start_iter (" +
               std::to_string(start) + ") are plain allreduce, and " +
               (compressed == 0 ? std::string("none") : "only " + std::to_string(compressed)) +
               " of the " + std::to_string(shape.iters) + " timed iterations (after --warmup " +
               std::to_string(shape.warmup) + ") come after it: pass --warmup " +
               std::to_string(start) + ", or a smaller start_iter";
    }
    if (!f.why.empty()) out.push_back(f);
  }
  return out;
}

}  // namespace ddph::tool
