// The phases a session's hooks report (ddph_host_t.span, ABI 1.7) come back
// from ddph_session_take_spans with the bucket's step and index (as its
// metrics record has them), inside the bucket's time from submit to done,
// and in the order the hook runs them. One rank over Gloo: quantization's
// 8-bit reduce-scatter, and hook_then_optimizer (whose host buckets step on
// a thread of the hook's own) around fp16_compress.
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "conformance/lent_bucket.h"

namespace {

constexpr int64_t kNumel = 4096;
constexpr int kBuckets = 3, kSteps = 2;

std::string yaml(const std::string& hook) {
  return "plugin_path: [" DDPH_PLUGIN_DIR
         "]\ncomm: {backend: gloo, rank: 0, world_size: 1}\nhook: " +
         hook + "\n";
}

const char* kQuant8 =
    "{family: quantization, name: per_channel, options: {protocol: reduce_scatter, bits: 8}}";
const char* kStepFp16 =
    "{family: optimizer_overlap, name: hook_then_optimizer, options: {optimizer: sgd, lr: 0.1}, "
    "wrap: {family: default, name: fp16_compress}}";

uint64_t steady_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// One submitted bucket: its storage and when it was submitted and done, on
// the clock the ABI states for spans (CLOCK_MONOTONIC = steady_clock).
struct Timed {
  std::unique_ptr<ddph::plugin_checks::LentBucket> bucket;
  uint64_t submit_ns = 0, done_ns = 0;
  ddph_code_t code = DDPH_INTERNAL;
  static void done(void* user, ddph_error_t* e) {
    auto* t = static_cast<Timed*>(user);
    t->done_ns = steady_ns();
    t->code = ddph_error_code(e);
    ddph_error_free(e);
  }
};

struct SpanRun {
  ddph_session_t* s = nullptr;
  std::vector<std::unique_ptr<Timed>> buckets;  // step-major
  std::map<std::pair<uint64_t, uint32_t>, std::vector<ddph_span_t>> spans;
  std::vector<ddph_bucket_metrics_t> metrics;
  ~SpanRun() { ddph_session_close(s); }
};

// kSteps steps of kBuckets buckets through `hook`, then every span and metric.
void run(const std::string& hook, SpanRun& r) {
  const std::string text = yaml(hook);
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = text.c_str();
  o.rank = -1;
  o.world_size = -1;
  ddph_error_t* e = ddph_session_open(&o, &r.s);
  ASSERT_EQ(e, nullptr) << ddph_error_message(e);
  for (int step = 0; step < kSteps; ++step)
    for (int i = 0; i < kBuckets; ++i) {
      auto t = std::make_unique<Timed>();
      t->bucket = std::make_unique<ddph::plugin_checks::LentBucket>(kNumel, 64, kNumel / 64);
      t->bucket->b.index = uint64_t(i);
      t->bucket->b.step = uint64_t(step);
      t->bucket->b.is_last = i == kBuckets - 1;
      t->submit_ns = steady_ns();
      ASSERT_EQ(ddph_session_submit(r.s, &t->bucket->b, &Timed::done, t.get()), nullptr);
      r.buckets.push_back(std::move(t));
    }
  e = ddph_session_flush(r.s);
  ASSERT_EQ(e, nullptr) << ddph_error_message(e);
  ddph_span_t span;
  int32_t taken = 1;
  while (true) {
    span.struct_size = sizeof span;
    ASSERT_EQ(ddph_session_take_spans(r.s, &span, &taken), nullptr);
    if (!taken) break;
    EXPECT_EQ(span.struct_size, sizeof span);
    r.spans[{span.step, span.bucket}].push_back(span);
  }
  ddph_bucket_metrics_t m;
  while (true) {
    m.struct_size = sizeof m;
    ASSERT_EQ(ddph_session_take_metrics(r.s, &m, &taken), nullptr);
    if (!taken) break;
    r.metrics.push_back(m);
  }
}

std::vector<ddph_span_t> of_phase(const std::vector<ddph_span_t>& spans, ddph_phase_t phase) {
  std::vector<ddph_span_t> out;
  for (const ddph_span_t& s : spans)
    if (s.phase == phase) out.push_back(s);
  return out;
}

// Every bucket has the phases, inside its own submit..done time.
void expect_nested(const SpanRun& r, const std::vector<ddph_phase_t>& phases) {
  ASSERT_EQ(r.buckets.size(), size_t(kSteps * kBuckets));
  ASSERT_EQ(r.metrics.size(), r.buckets.size());
  EXPECT_EQ(r.spans.size(), r.buckets.size()) << "a span with another step or bucket index";
  for (size_t k = 0; k < r.buckets.size(); ++k) {
    const Timed& t = *r.buckets[k];
    EXPECT_EQ(t.code, DDPH_OK);
    // The metrics record of the k-th submission names the same step/bucket.
    const auto key = std::make_pair(uint64_t(k / kBuckets), uint32_t(k % kBuckets));
    EXPECT_EQ(r.metrics[k].step, key.first);
    EXPECT_EQ(r.metrics[k].bucket, key.second);
    // Its start (ABI 1.7) is on the same clock, between submit and done.
    EXPECT_LE(t.submit_ns, r.metrics[k].start_ns);
    EXPECT_LE(r.metrics[k].start_ns, t.done_ns);
    auto found = r.spans.find(key);
    ASSERT_NE(found, r.spans.end()) << "no span of step " << key.first << " bucket " << key.second;
    for (ddph_phase_t p : phases)
      EXPECT_FALSE(of_phase(found->second, p).empty())
          << "step " << key.first << " bucket " << key.second << " has no phase " << int(p);
    for (const ddph_span_t& s : found->second) {
      EXPECT_LE(t.submit_ns, s.start_ns) << "phase " << s.phase << " of bucket " << k;
      EXPECT_LE(s.start_ns, s.end_ns);
      EXPECT_LE(s.end_ns, t.done_ns) << "phase " << s.phase << " of bucket " << k;
    }
  }
}

uint64_t first_start(const std::vector<ddph_span_t>& v) {
  uint64_t t = UINT64_MAX;
  for (const auto& s : v) t = std::min(t, s.start_ns);
  return t;
}
uint64_t last_end(const std::vector<ddph_span_t>& v) {
  uint64_t t = 0;
  for (const auto& s : v) t = std::max(t, s.end_ns);
  return t;
}

}  // namespace

TEST(SessionSpans, QuantizationReportsItsPhasesNestedInEachBucketInOrder) {
  SpanRun r;
  run(kQuant8, r);
  if (HasFatalFailure()) return;
  expect_nested(r, {DDPH_PHASE_COMPRESS, DDPH_PHASE_COLLECTIVE, DDPH_PHASE_DECOMPRESS});
  for (const auto& kv : r.spans) {
    const auto compress = of_phase(kv.second, DDPH_PHASE_COMPRESS);
    const auto collective = of_phase(kv.second, DDPH_PHASE_COLLECTIVE);
    const auto decompress = of_phase(kv.second, DDPH_PHASE_DECOMPRESS);
    // Encoding comes first, the last decoding after the last collective.
    EXPECT_LE(first_start(compress), first_start(collective));
    EXPECT_LE(compress.front().end_ns, collective.front().start_ns);
    EXPECT_GE(last_end(decompress), last_end(collective));
  }
}

TEST(SessionSpans, AnOptimizerSteppedOnTheHooksOwnThreadIsItsBucketsPhase) {
  SpanRun r;
  run(kStepFp16, r);
  if (HasFatalFailure()) return;
  expect_nested(r, {DDPH_PHASE_COMPRESS, DDPH_PHASE_COLLECTIVE, DDPH_PHASE_DECOMPRESS,
                    DDPH_PHASE_OPTIMIZER_STEP});
  for (const auto& kv : r.spans) {
    const auto step = of_phase(kv.second, DDPH_PHASE_OPTIMIZER_STEP);
    ASSERT_EQ(step.size(), 1u) << "one step per bucket";
    // The step uses the reduced gradient: after the cast back.
    EXPECT_LE(last_end(of_phase(kv.second, DDPH_PHASE_DECOMPRESS)), step[0].start_ns);
    EXPECT_LE(last_end(of_phase(kv.second, DDPH_PHASE_COLLECTIVE)), step[0].start_ns);
  }
}

TEST(SessionSpans, TakeSpansRefusesWhatTakeMetricsRefuses) {
  SpanRun r;
  run(kQuant8, r);
  if (HasFatalFailure()) return;
  ddph_span_t span{};
  int32_t taken = 7;
  span.struct_size = DDPH_SPAN_SIZE_V1_7 - 1;
  ddph_error_t* e = ddph_session_take_spans(r.s, &span, &taken);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddph_error_message(e)).find("smaller than the v1.7 size"),
            std::string::npos)
      << ddph_error_message(e);
  ddph_error_free(e);
  EXPECT_EQ(taken, 0);
  e = ddph_session_take_spans(r.s, &span, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  ddph_error_free(e);
  e = ddph_session_take_spans(nullptr, &span, &taken);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  ddph_error_free(e);
}
