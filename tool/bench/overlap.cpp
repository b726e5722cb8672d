#include "tool/bench/overlap.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tool/bench/measure.h"
#include "tool/cli.h"
#include "tool/json_line.h"
#include "tool/output_file.h"
#include "tool/ranks/buckets.h"
#include "tool/ranks/session.h"

namespace ddph::tool {
namespace {

bool steps_optimizer(const std::string& config) {
  YAML::Node hook = YAML::LoadFile(config)["hook"];
  return hook && hook["name"].as<std::string>("") == "hook_then_optimizer";
}

// The three configs the optimizer comparison needs, derived from the
// overlap config: its inner hook alone, its optimizer around
// debugging/noop, and debugging/noop alone.
void derive_configs(const std::string& config, const std::string& inner_path,
                    const std::string& optimizer_path, const std::string& empty_path) {
  YAML::Node root = YAML::LoadFile(config);
  YAML::Node hook = root["hook"];
  if (!hook["wrap"])
    throw std::runtime_error(config + ": --overlap needs hook_then_optimizer's `wrap`");
  YAML::Node inner = YAML::Clone(root);
  inner.remove("rules");
  inner["hook"] = YAML::Clone(hook["wrap"]);
  YAML::Node optimizer = YAML::Clone(root);
  optimizer.remove("rules");
  YAML::Node noop;
  noop["family"] = "debugging";
  noop["name"] = "noop";
  optimizer["hook"]["wrap"] = noop;
  YAML::Node empty = YAML::Clone(root);
  empty.remove("rules");
  empty["hook"] = YAML::Clone(noop);
  auto write = [](const std::string& path, const YAML::Node& node) {
    std::ostringstream text;
    text << node << "\n";
    write_output_file(path, text.str(), "--overlap's derived job file");
  };
  write(inner_path, inner);
  write(optimizer_path, optimizer);
  write(empty_path, empty);
}

}  // namespace

OverlapResult bench_overlap(const OverlapOptions& o, const std::string& config,
                            const std::string& work_dir, const std::string& url, int rank,
                            int64_t numel) {
  OverlapResult r;
  r.optimizer = steps_optimizer(config);
  const std::string inner_cfg = work_dir + "/inner.yaml", opt_cfg = work_dir + "/optimizer.yaml",
                    empty_cfg = work_dir + "/empty.yaml";
  if (r.optimizer) derive_configs(config, inner_cfg, opt_cfg, empty_cfg);
  // Opened in the same order on every rank: each gets its own store prefix.
  Session overlap(config, rank, o.world, url);
  std::unique_ptr<Session> inner, optimizer, empty;
  if (r.optimizer) {
    inner = std::make_unique<Session>(inner_cfg, rank, o.world, url);
    optimizer = std::make_unique<Session>(opt_cfg, rank, o.world, url);
    empty = std::make_unique<Session>(empty_cfg, rank, o.world, url);
  }

  const int64_t per = std::max<int64_t>(1, numel / o.buckets);
  std::vector<std::vector<int64_t>> shapes(size_t(o.buckets), std::vector<int64_t>{per});
  std::vector<std::unique_ptr<GradBucket>> buckets;
  std::vector<std::vector<float>> params(size_t(o.buckets), std::vector<float>(size_t(per), 0.f));
  for (int k = 0; k < o.buckets; ++k) {
    BucketPlan plan;
    plan.slots.push_back(BucketSlot{0, 0, per});
    plan.numel = per;
    buckets.push_back(std::make_unique<GradBucket>(
        uint64_t(k), plan, std::vector<const std::vector<int64_t>*>{&shapes[size_t(k)]}));
    buckets.back()->share_param_data({params[size_t(k)].data()});
  }
  std::vector<float> pristine(static_cast<size_t>(per));
  for (size_t i = 0; i < pristine.size(); ++i)
    pristine[i] = float((i * 2654435761u + unsigned(rank) * 40503u) % 2000) / 1000.0f - 1.0f;
  auto refill = [&] {
    for (auto& b : buckets) std::copy(pristine.begin(), pristine.end(), b->data());
  };
  const auto backward = std::chrono::duration<double, std::milli>(o.backward_ms);
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  auto timed = [&](auto&& body) {
    refill();
    overlap.barrier();
    auto t0 = now();
    body();
    auto t1 = now();
    overlap.barrier();  // nobody refills while the slowest rank is still timed
    return secs(t0, t1);
  };
  auto pass = [&](Session& s, uint64_t step, bool with_backward) {
    for (int k = 0; k < o.buckets; ++k) {
      if (with_backward) std::this_thread::sleep_for(backward);
      s.submit(buckets[size_t(k)]->bucket(step, k + 1 == o.buckets));
    }
    s.flush();
  };
  // The variants of one iteration; a hook that counts steps sees each of
  // its passes as a step of its own.
  constexpr int kVariants = 4;
  uint64_t step = 0;
  auto variants = [&](double* v) {
    if (r.optimizer) {
      v[0] = timed([&] { pass(overlap, step, true); });
      v[1] = timed([&] { pass(*inner, step, true); });
      v[2] = timed([&] { pass(*optimizer, step, false); });
      v[3] = timed([&] { pass(*empty, step, false); });
      ++step;
      return;
    }
    v[0] = timed([&] { pass(overlap, step++, true); });
    v[1] = timed([&] {
      std::this_thread::sleep_for(backward * o.buckets);
      pass(overlap, step++, false);
    });
    v[2] = timed([&] { pass(overlap, step++, false); });
  };

  // times[v * iters + it]: variant v of iteration it; one MAX allreduce at the end.
  std::vector<double> times(kVariants * size_t(o.iters));
  for (int it = -o.warmup; it < o.iters; ++it) {
    double v[kVariants] = {};
    variants(v);
    if (it < 0) continue;
    for (int k = 0; k < kVariants; ++k) times[size_t(k * o.iters + it)] = v[k];
  }
  overlap.allreduce(times.data(), int64_t(times.size()), DDPH_MAX);
  auto at = [&](int v, int it) { return times[size_t(v * o.iters + it)]; };
  auto med = [&](int v) {
    return median(
        std::vector<double>(times.begin() + v * o.iters, times.begin() + (v + 1) * o.iters));
  };
  // The median of per-iteration differences: slow drifts of the machine
  // cancel within an iteration.
  auto med_diff = [&](int a, int b) {
    std::vector<double> d(size_t(o.iters));
    for (int it = 0; it < o.iters; ++it) d[size_t(it)] = at(a, it) - at(b, it);
    return median(d);
  };
  r.overlap_s = med(0);
  if (r.optimizer) {
    r.inner_s = med(1);
    r.added_s = med_diff(0, 1);
    r.work_s = med_diff(2, 3);
    r.separate_s = r.inner_s + r.work_s;
  } else {
    r.separate_s = med(1);
    r.work_s = med(2);
  }
  return r;
}

void print_overlap(const OverlapOptions& o, const std::string& config, const std::string& label,
                   const std::string& name, int64_t numel, const OverlapResult& r) {
  if (o.json) {
    Json j = {{"hook", label},
              {"config", config},
              {"world", o.world},
              {"buckets", o.buckets},
              {"bucket_bytes", numel / o.buckets * 4},
              {"backward_ms_per_bucket", o.backward_ms},
              {"hidden_work", r.optimizer ? "optimizer" : "reduction"},
              {"overlap_step_s", r.overlap_s},
              {"separate_step_s", r.separate_s},
              {r.optimizer ? "optimizer_pass_s" : "reduction_pass_s", r.work_s}};
    if (r.optimizer) {
      j["inner_step_s"] = r.inner_s;
      j["optimizer_added_s"] = r.added_s;
    }
    j["hidden_fraction"] = r.hidden();
    j["iters"] = o.iters;
    print_json_line(j);
  } else {
    std::printf("%s: world %d, %d buckets of %s, backward %.1f ms per bucket\n", name.c_str(),
                o.world, o.buckets, format_mib(double(numel / o.buckets * 4)).c_str(),
                o.backward_ms);
    const char* work = r.optimizer ? "optimizer" : "reduction";
    std::printf("  step with overlap            %9.3f ms\n", r.overlap_s * 1e3);
    if (r.optimizer) {
      std::printf("  step of the inner hook alone %9.3f ms\n", r.inner_s * 1e3);
      std::printf("  optimizer added to the step  %9.3f ms\n", r.added_s * 1e3);
    } else {
      std::printf("  backward, then reduction     %9.3f ms\n", r.separate_s * 1e3);
    }
    std::printf("  %-28s %9.3f ms\n", (std::string(work) + " pass alone").c_str(), r.work_s * 1e3);
    std::printf("  %-28s %8.1f %%  (medians of %d steps, slowest rank)\n",
                (std::string(work) + " hidden").c_str(), 100 * r.hidden(), o.iters);
  }
  std::fflush(stdout);
}

}  // namespace ddph::tool
