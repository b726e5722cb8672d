#include "tool/bench/rows.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <exception>

#include "core/base/dtype.h"
#include "tool/bench/preflight.h"
#include "tool/cli.h"
#include "tool/json_line.h"
#include "tool/ranks/job_file.h"

namespace ddph::tool {
namespace {

// "configs/quantization_rs8.yaml" -> "quantization_rs8".
std::string config_stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  const size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

// Hooks whose point is to send fewer bytes than they are handed.
bool meant_to_compress(const std::string& label) {
  return label.find("quantization/") != std::string::npos ||
         label.find("powersgd/") != std::string::npos ||
         label.find("_compress") != std::string::npos;
}

// A compressing hook that sent every byte it was handed measured the
// uncompressed path: say so, with the usual reasons, rather than let the
// figure pass for the hook's.
void warn_if_nothing_compressed(const BenchOptions& o, const Row& row, const Result& r) {
  if (row.warned || !meant_to_compress(row.label) || r.bytes_in == 0 || r.bytes_out < r.bytes_in)
    return;
  std::fprintf(stderr,
               "ddph bench: warning: %s compressed nothing in the timed iterations (it gave "
               "collectives %" PRIu64 " of the %" PRIu64
               " bytes it was handed): for powersgd, a flat bucket has no matrix to factor "
               "(pass --matrix ROWSxCOLS) and steps before start_iter are plain allreduce "
               "(--warmup %d + --iters %d steps ran); for quantization, buckets under "
               "min_bytes go uncompressed\n",
               row.name.c_str(), r.bytes_out, r.bytes_in, o.warmup, o.iters);
}

// The pairs in the order they ran: each one's starts (rank 0's clock) and
// times (the slowest rank's), in seconds.
Json pairs_json(const std::vector<TimedPair>& pairs) {
  Json list = Json::array();
  for (const TimedPair& p : pairs)
    list.push_back({{"hook_start_s", p.hook_start_s},
                    {"hook_s", p.hook_s},
                    {"baseline_start_s", p.baseline_start_s},
                    {"baseline_s", p.baseline_s}});
  return list;
}

void print_json(const BenchOptions& o, const std::string& config, const Row& row,
                int64_t bucket_bytes, const Result& r) {
  // "config" tells apart two configs of one hook with different options.
  Json j = {{"hook", row.label},
            {"config", config},
            {"world", o.world},
            {"bucket_bytes", bucket_bytes},
            {"median_s", r.median_s},
            {"baseline_allreduce_median_s", r.baseline_s},
            {"wire_bytes_per_rank", json_number(std::round(r.wire_bytes_per_rank))},
            {"ratio_to_baseline", r.ratio},
            {"iters", o.iters},
            {"pairs", pairs_json(r.pairs)},
            {"hook_bytes_in", r.bytes_in},
            {"hook_bytes_out", r.bytes_out},
            {"state_bytes_per_rank", json_number(std::round(r.state_bytes))},
            {"peak_rss_bytes", json_number(std::round(r.peak_rss_bytes))}};
  if (r.busy >= 0) {
    j["cores_busy"] = r.busy;
    j["baseline_cores_busy"] = r.baseline_busy;
  }
  if (o.machines > 0) {
    j["machines"] = o.machines;
    j["bytes_between_machines"] = json_number(std::round(r.cross_machine_bytes));
  }
  Json choices = Json::array();
  for (const auto& [choice, iterations] : r.choices)
    choices.push_back({{"choice", choice}, {"iterations", iterations}});
  j["choices"] = std::move(choices);
  if (o.link.rate_bits_per_s > 0) {
    j["link"] = o.link.text;
    j["link_bits_per_s"] = json_number(o.link.rate_bits_per_s);
    j["wire_bound_s"] = wire_seconds(o.link, r.wire_bytes_per_rank);
    j["baseline_wire_bound_s"] = wire_seconds(o.link, r.baseline_wire_bytes_per_rank);
  }
  print_json_line(j);
}

void print_text(const BenchOptions& o, const Row& row, size_t label_width, int64_t bucket_bytes,
                const Result& r) {
  const int w = static_cast<int>(label_width);
  std::printf("%-*s %5d %11s %8.3f ms %12.3f ms %6.2f %12s\n", w, row.name.c_str(), o.world,
              format_mib(double(bucket_bytes)).c_str(), r.median_s * 1e3, r.baseline_s * 1e3,
              r.ratio, format_mib(r.wire_bytes_per_rank).c_str());
  if (r.state_bytes > 0)
    std::printf("%-*s   hook state %s per rank, peak resident memory %s (largest rank)\n", w, "",
                format_mib(r.state_bytes).c_str(), format_mib(r.peak_rss_bytes, 1).c_str());
  if (!r.choices.empty()) {
    std::string chose;
    for (const auto& [choice, iterations] : r.choices)
      chose += (chose.empty() ? "" : ", ") + choice + " x" + std::to_string(iterations);
    std::printf("%-*s   auto chose %s (of %d timed iterations)\n", w, "", chose.c_str(), o.iters);
  }
  if (o.machines > 0)
    std::printf("%-*s   %d machines: %s between machines per bucket (all ranks)\n", w, "",
                o.machines, format_mib(r.cross_machine_bytes).c_str());
  if (o.link.rate_bits_per_s > 0) {
    const double hook_bound = wire_seconds(o.link, r.wire_bytes_per_rank);
    const double base_bound = wire_seconds(o.link, r.baseline_wire_bytes_per_rank);
    std::printf("%-*s   at %s: wire bound %.3f ms (%.2fx), raw allreduce's %.3f ms (%.2fx)\n", w,
                "", o.link.text.c_str(), hook_bound * 1e3,
                hook_bound > 0 ? r.median_s / hook_bound : 0.0, base_bound * 1e3,
                base_bound > 0 ? r.baseline_s / base_bound : 0.0);
    if (r.busy >= 0)
      std::printf("%-*s   cores busy: %.0f%% during the hook, %.0f%% during the raw allreduce\n", w,
                  "", 100 * r.busy, 100 * r.baseline_busy);
  }
}

}  // namespace

std::vector<std::string> row_names(const std::vector<std::string>& configs,
                                   const std::vector<std::string>& labels) {
  auto shared = [&](size_t i, auto key) {
    for (size_t j = 0; j < configs.size(); ++j)
      if (j != i && labels[j] == labels[i] && key(j) == key(i)) return true;
    return false;
  };
  auto always = [](size_t) { return 0; };
  auto stem = [&](size_t k) { return config_stem(configs[k]); };
  auto path = [&](size_t k) { return configs[k]; };
  std::vector<std::string> names;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!shared(i, always)) {
      names.push_back(labels[i]);
    } else if (!shared(i, stem)) {
      names.push_back(labels[i] + " (" + stem(i) + ")");
    } else {
      std::string name = labels[i] + " (" + configs[i] + ")";
      if (shared(i, path)) {
        int n = 1;
        for (size_t j = 0; j < i; ++j) n += labels[j] == labels[i] && configs[j] == configs[i];
        name += " #" + std::to_string(n);
      }
      names.push_back(name);
    }
  }
  return names;
}

void warn_before_the_run(const BenchOptions& o, std::vector<Row>& rows) {
  if (o.overlap_buckets > 0) return;
  BenchShape shape;
  shape.numel = bucket_numel(o);
  shape.bucket_bytes =
      shape.numel * int64_t(ddph::dtype_size(parse_bucket_dtype(o.dtype, "--dtype")));
  shape.matrix_rows = o.matrix_rows;
  shape.matrix_cols = o.matrix_cols;
  shape.warmup = o.warmup;
  shape.iters = o.iters;
  for (size_t c = 0; c < o.configs.size(); ++c) {
    if (rows[c].label.find("powersgd/") == std::string::npos) continue;
    std::vector<CompressionForecast> forecasts;
    try {
      forecasts = forecast_compression(o.configs[c], shape);
    } catch (const std::exception&) {
      continue;
    }
    for (const CompressionForecast& f : forecasts) {
      std::fprintf(stderr, "ddph bench: warning: %s will compress %s: %s\n", rows[c].name.c_str(),
                   f.nothing ? "nothing in the timed iterations" : "in only some timed iterations",
                   f.why.c_str());
      rows[c].warned = rows[c].warned || f.nothing;
    }
  }
  std::fflush(stderr);
}

void print_header(size_t label_width) {
  std::printf("%-*s %5s %11s %11s %15s %6s %12s\n", static_cast<int>(label_width), "hook", "world",
              "bucket", "median", "raw allreduce", "ratio", "wire/rank");
}

void print_result(const BenchOptions& o, const std::string& config, const Row& row,
                  size_t label_width, int64_t bucket_bytes, const Result& r) {
  warn_if_nothing_compressed(o, row, r);
  if (o.json)
    print_json(o, config, row, bucket_bytes, r);
  else
    print_text(o, row, label_width, bucket_bytes, r);
  std::fflush(stdout);
}

}  // namespace ddph::tool
