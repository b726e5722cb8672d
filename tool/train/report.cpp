#include "tool/train/report.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <stdexcept>

#include "tool/cli.h"
#include "tool/json_line.h"

namespace ddph::tool {

const char kMetricsCsvHeader[] =
    "step,loss,accuracy,bytes_in,bytes_out,wire_bytes,compression,hook_seconds,wall_seconds,"
    "hook,choices";

namespace {

// A CSV field as Python's csv module writes it: quoted, with quotes
// doubled, when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

}  // namespace

TrainReport::TrainReport(bool json, const std::string& metrics_path) : json_(json) {
  if (metrics_path.empty()) return;
  csv_ = std::make_unique<OutputFile>(metrics_path, "--metrics");
  csv_->write(std::string(kMetricsCsvHeader) + "\n");
  csv_->flush();
}

TrainReport::~TrainReport() = default;

void TrainReport::check_metrics_path(const std::string& metrics_path) {
  TrainReport(false, metrics_path).close_metrics();
}

void TrainReport::close_metrics() {
  if (csv_ != nullptr) csv_->close();
}

void TrainReport::header(const TrainHeader& h) {
  hook_ = h.hook;
  if (json_) {
    print_json_line({{"event", "start"},
                     {"hook", h.hook},
                     {"world", h.world},
                     {"steps", h.steps},
                     {"batch", h.batch},
                     {"buckets", h.buckets},
                     {"bucket_bytes", h.bucket_bytes},
                     {"params", h.params},
                     {"dtype", h.dtype},
                     {"hook_steps_optimizer", h.hook_steps_optimizer}});
  } else {
    std::printf("ddph train: %s on %s, %d steps, batch %d per rank, %s of <= %s (%" PRId64
                " params)\n",
                h.hook.c_str(), count_of(h.world, "rank").c_str(), h.steps, h.batch,
                count_of(static_cast<long long>(h.buckets), "bucket").c_str(),
                format_size(h.bucket_bytes).c_str(), h.params);
    if (h.dtype != "f32")
      std::printf("gradient buckets in %s, parameters in f32\n", h.dtype.c_str());
    if (h.hook_steps_optimizer)
      std::printf("the hook steps the optimizer (its own options; --lr/--momentum unused)\n");
  }
  std::fflush(stdout);
}

void TrainReport::progress(const TrainProgress& p) {
  if (json_)
    print_json_line({{"event", "step"},
                     {"step", p.step},
                     {"loss", p.loss},
                     {"train_accuracy", p.train_accuracy},
                     {"test_accuracy", p.test_accuracy},
                     {"ms_per_step", p.ms_per_step},
                     {"wire_bytes", p.wire_bytes_total},
                     {"choices", p.choices}});
  else
    std::printf(
        "step %6d  loss %.4f  train-acc %5.1f%%  test-acc %5.1f%%  ms/step %.3f  sent %s%s%s\n",
        p.step, p.loss, 100.0 * p.train_accuracy, 100.0 * p.test_accuracy, p.ms_per_step,
        format_mib(double(p.wire_bytes_total)).c_str(), p.choices.empty() ? "" : "  chose ",
        p.choices.c_str());
  std::fflush(stdout);
  if (csv_ == nullptr) return;
  // Empty when the hook counted no bytes out, as ddphooks.MetricsWriter writes it.
  char compression[32] = "";
  if (p.bytes_out > 0)
    std::snprintf(compression, sizeof compression, "%.9g", p.bytes_in / p.bytes_out);
  char row[320];
  std::snprintf(row, sizeof row, "%d,%.9g,%.9g,%.9g,%.9g,%.9g,%s,%.9g,%.9g,", p.step, p.loss,
                p.test_accuracy, p.bytes_in, p.bytes_out, p.wire_bytes, compression, p.hook_seconds,
                p.wall_seconds);
  csv_->write(row + csv_field(hook_) + "," + csv_field(p.choices) + "\n");
  csv_->flush();
}

void TrainReport::summary(const TrainSummary& s) {
  if (json_) {
    Json hashes = Json::array();
    for (uint64_t h : s.hashes) hashes.push_back(hex64(h));
    print_json_line({{"event", "summary"},
                     {"steps", s.steps},
                     {"seconds", s.seconds},
                     {"final_loss", s.final_loss},
                     {"test_accuracy", s.test_accuracy},
                     {"train_set_loss", s.train_set_loss},
                     {"wire_bytes", s.wire_bytes},
                     {"buckets", s.buckets},
                     {"parameters_identical", s.identical},
                     {"diverged", s.diverged},
                     {"non_finite_parameters", s.non_finite_parameters},
                     {"drift_expected", s.drift_expected},
                     {"drift", s.drift},
                     {"hashes", std::move(hashes)}});
    return;
  }
  std::printf(
      "summary: %d steps in %.2f s (%.3f ms/step), final loss %.4f, test accuracy %.1f%% "
      "(chance %.1f%%), %s sent per rank, %" PRIu64 " buckets reduced\n",
      s.steps, s.seconds, 1000 * s.seconds / s.steps, s.final_loss, 100.0 * s.test_accuracy,
      100.0 * s.chance, format_mib(double(s.wire_bytes)).c_str(), s.buckets);
  std::printf("train-set loss %.6f (whole training set, final parameters)\n", s.train_set_loss);
  if (s.diverged) {
    std::printf(
        "training DIVERGED: final loss %g, %" PRIu64
        " parameter values not finite over the ranks; the parameters are not compared (try a "
        "smaller --lr)\n",
        s.final_loss, s.non_finite_parameters);
  } else if (s.identical) {
    std::printf(
        "parameters bit-identical on %s: fnv1a %s\n",
        s.world == 1 ? "the one rank" : ("all " + std::to_string(s.world) + " ranks").c_str(),
        hex64(s.hash).c_str());
  } else if (s.drift_expected) {
    std::printf(
        "parameters differ across ranks, as the replicas of a parameter-averaging hook do "
        "between averages: largest distance from their mean %.3g of the largest parameter "
        "(--final-average averages them after the last step)\n",
        s.drift);
  } else {
    std::printf("parameters DIFFER across ranks:");
    for (size_t r = 0; r < s.hashes.size(); ++r)
      std::printf(" rank %zu %s", r, hex64(s.hashes[r]).c_str());
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace ddph::tool
