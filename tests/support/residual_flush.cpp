#include "tests/support/residual_flush.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/base/error.h"
#include "core/base/options.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "tests/comm_gloo/harness.h"
#include "tests/hooks/hook_runner.h"
#include "tests/support/multiprocess.h"

namespace ddph_test {
namespace {

// Rank r's gradient at a step: uniform in [-1, 1), the same wherever it is
// computed, so every rank knows every rank's.
std::vector<float> gradient(int rank, int step, size_t n) {
  std::mt19937 gen(uint32_t(1000 * rank + step + 1));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> g(n);
  for (float& x : g) x = u(gen);
  return g;
}

// Every rank's buffer, in rank order (an allgather on comm).
std::vector<float> gathered(ddph_comm_t* comm, std::vector<float>& mine, int world) {
  std::vector<float> all(mine.size() * size_t(world));
  ddph::FlatTensor send(mine.data(), ddph::DType::F32, int64_t(mine.size()));
  ddph::FlatTensor recv(all.data(), ddph::DType::F32, int64_t(all.size()));
  ddph::comm_allgather(comm, send, recv, nullptr);
  return all;
}

// take_residual of `hook` into data, as the bucket at `index`, lent from place.
ErrorInfo take(const ddph_hook_ref_t& hook, std::vector<float>& data,
               const std::vector<Shape>& shapes, uint64_t index, uint64_t step,
               BufferPlace& place) {
  ShapedBucket b(data, shapes, index, step, true);
  ErrorInfo e;
  place.lend(*b.get(), data, [&](const ddph_bucket_t& lent) {
    e = take_error(hook.hook->take_residual(hook.state, &lent));
  });
  return e;
}

}  // namespace

int run_flush_case(const FlushCase& c, int rank, int world, const std::string& dir,
                   BufferPlace& place, FlushOutcome* out) {
  const std::string unplaced = place.prepare(rank);
  DDPH_CHILD_CHECK(unplaced.empty(), "rank %d: %s", rank, unplaced.c_str());
  ddph_comm_t* comm = comm_gloo_test::must_connect(rank, world, dir, 30000);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d: no Gloo communicator", rank);
  const int rc = [&]() -> int {
    const ddph_hook_t* table = find_hook(c.family, c.hook);
    const ddph::OptionList options =
        ddph::resolve_options(table->options, table->num_options, c.options);
    HookInstance hook(table, comm, nullptr,
                      std::vector<ddph_option_t>(options.data(), options.data() + options.size()));
    out->offered = table->struct_size >= DDPH_HOOK_SIZE_V1_10 && table->take_residual != nullptr;
    DDPH_CHILD_CHECK(out->offered, "rank %d: %s/%s offers no take_residual", rank, c.family,
                     c.hook);
    const size_t n = size_t(numel_of(c.shapes));
    const uint64_t index = 3;
    // The sums over steps of the results and of the true means, in double.
    std::vector<double> results(n, 0.0), truth(n, 0.0);
    for (int step = 0; step < c.steps; ++step) {
      std::vector<float> data = gradient(rank, step, n);
      ShapedBucket b(data, c.shapes, index, uint64_t(step), true);
      RunOutcome run;
      place.lend(*b.get(), data,
                 [&](const ddph_bucket_t& lent) { run = run_bucket(hook.ref(), &lent); });
      DDPH_CHILD_CHECK(run.returned.code == DDPH_OK && run.completed.code == DDPH_OK,
                       "rank %d step %d: %s%s", rank, step, run.returned.message.c_str(),
                       run.completed.message.c_str());
      for (size_t i = 0; i < n; ++i) results[i] += data[i];
      for (int r = 0; r < world; ++r) {
        const std::vector<float> g = gradient(r, step, n);
        for (size_t i = 0; i < n; ++i) truth[i] += double(g[i]) / world;
      }
    }
    // A bucket of another layout (twice as long: batched_powersgd's padded
    // square then differs too) is refused, and changes nothing: the flush
    // below must still find every residual.
    std::vector<float> other(2 * n, 0.0f);
    ErrorInfo e = take(hook.ref(), other, {{int64_t(2 * n)}}, index, uint64_t(c.steps), place);
    out->other_layout_refused =
        e.code == DDPH_INVALID_ARGUMENT && e.message.find("bucket 3") != std::string::npos &&
        std::all_of(other.begin(), other.end(), [](float x) { return x == 0; });
    // The residuals into a zero bucket, averaged exactly over the ranks.
    std::vector<float> flushed(n, 0.0f);
    e = take(hook.ref(), flushed, c.shapes, index, uint64_t(c.steps), place);
    DDPH_CHILD_CHECK(e.code == DDPH_OK, "rank %d: take_residual: %s", rank, e.message.c_str());
    out->first_empty = std::all_of(flushed.begin(), flushed.end(), [](float x) { return x == 0; });
    const std::vector<float> all = gathered(comm, flushed, world);
    for (size_t i = 0; i < n; ++i) {
      double mean = 0;
      for (int r = 0; r < world; ++r) mean += double(all[size_t(r) * n + i]) / world;
      out->flushed = std::max(out->flushed, std::fabs(results[i] + mean - truth[i]));
      out->unflushed = std::max(out->unflushed, std::fabs(results[i] - truth[i]));
      out->scale = std::max(out->scale, std::fabs(truth[i]));
    }
    // Taken once: a second take adds nothing.
    std::vector<float> again(n, 0.0f);
    e = take(hook.ref(), again, c.shapes, index, uint64_t(c.steps), place);
    DDPH_CHILD_CHECK(e.code == DDPH_OK, "rank %d: second take_residual: %s", rank,
                     e.message.c_str());
    out->second_empty = std::all_of(again.begin(), again.end(), [](float x) { return x == 0; });
    // An index the hook never reduced leaves the buffer as it was.
    std::vector<float> unseen = gradient(rank, 99, n);
    const std::vector<float> before = unseen;
    e = take(hook.ref(), unseen, c.shapes, index + 1, uint64_t(c.steps), place);
    DDPH_CHILD_CHECK(e.code == DDPH_OK, "rank %d: take_residual of an unseen index: %s", rank,
                     e.message.c_str());
    out->unseen_unchanged = std::memcmp(unseen.data(), before.data(), n * sizeof(float)) == 0;
    std::printf("[rank %d] %s/%s: worst error %.3g flushed, %.3g dropped (scale %.3g)\n", rank,
                c.family, c.hook, out->flushed, out->unflushed, out->scale);
    return 0;
  }();
  comm->destroy(comm->ctx);
  return rc;
}

void expect_flush_keeps_the_sum(const FlushCase& c, bool residual, double rounding,
                                const std::function<std::unique_ptr<BufferPlace>()>& make_place) {
  const auto res = run_ranks(
      2,
      [&](int rank, int world, const std::string& dir) {
        // Made in the rank's own process: a GPU place must not exist before fork().
        std::unique_ptr<BufferPlace> place =
            make_place ? make_place() : std::make_unique<BufferPlace>();
        FlushOutcome o;
        if (int rc = run_flush_case(c, rank, world, dir, *place, &o)) return rc;
        if (residual) {
          DDPH_CHILD_CHECK(o.flushed <= rounding,
                           "rank %d: the flushed residual leaves the sum off by %g (bound %g)",
                           rank, o.flushed, rounding);
          DDPH_CHILD_CHECK(o.unflushed > 100 * rounding,
                           "rank %d: dropping the residual loses only %g: no test", rank,
                           o.unflushed);
          DDPH_CHILD_CHECK(!o.first_empty, "rank %d: nothing flushed", rank);
          DDPH_CHILD_CHECK(o.other_layout_refused,
                           "rank %d: a bucket of another layout was not refused by name", rank);
        } else {
          DDPH_CHILD_CHECK(o.first_empty, "rank %d: a hook without error feedback flushed", rank);
        }
        DDPH_CHILD_CHECK(o.second_empty, "rank %d: a second take_residual added something", rank);
        DDPH_CHILD_CHECK(o.unseen_unchanged, "rank %d: an unseen index changed the bucket", rank);
        return 0;
      },
      120.0);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

}  // namespace ddph_test
