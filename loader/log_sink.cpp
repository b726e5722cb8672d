#include "loader/log_sink.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace ddph {
namespace loader {
namespace {

struct Sink {
  ddph_log_fn fn;
  void* user;
  ddph_log_level_t max_level;
};

// The current sink, immutable once published. A line being delivered holds
// its own reference, so ddph_set_log_sink may replace (and free) the sink
// while other threads log: they finish with the sink they loaded. Access
// only through std::atomic_load/atomic_store (C++17's shared_ptr atomics).
std::shared_ptr<const Sink> g_sink;

thread_local int32_t t_rank = -1;

const char* level_name(ddph_log_level_t level) {
  switch (level) {
    case DDPH_LOG_ERROR:
      return "error";
    case DDPH_LOG_WARN:
      return "warn";
    case DDPH_LOG_INFO:
      return "info";
    case DDPH_LOG_DEBUG:
      return "debug";
  }
  return "?";
}

ddph_log_level_t parse_level(const char* text) {
  if (text == nullptr) return DDPH_LOG_WARN;
  for (int l = DDPH_LOG_ERROR; l <= DDPH_LOG_DEBUG; ++l)
    if (std::strcmp(text, level_name(ddph_log_level_t(l))) == 0) return ddph_log_level_t(l);
  return DDPH_LOG_WARN;
}

void write_to_stderr(ddph_log_level_t level, const char* family, int32_t rank,
                     const char* message) {
  if (level > log_threshold()) return;
  char rank_text[24] = "";
  if (rank >= 0) std::snprintf(rank_text, sizeof rank_text, " [rank %d]", int(rank));
  // One fprintf per line so that lines from several threads do not interleave.
  std::fprintf(stderr, "ddph %s%s%s%s: %s\n", level_name(level), family ? " " : "",
               family ? family : "", rank_text, message ? message : "");
}

}  // namespace

ddph_log_level_t log_threshold() {
  static const ddph_log_level_t level = parse_level(std::getenv("DDPH_LOG_LEVEL"));
  return level;
}

int32_t thread_log_rank() {
  return t_rank;
}
void set_thread_log_rank(int32_t rank) {
  t_rank = rank;
}

void deliver_log_line(ddph_log_level_t level, const char* family, const char* message) {
  const std::shared_ptr<const Sink> sink = std::atomic_load(&g_sink);
  if (sink == nullptr) {
    write_to_stderr(level, family, t_rank, message);
    return;
  }
  if (level > sink->max_level) return;
  try {
    sink->fn(sink->user, level, family, t_rank, message ? message : "");
  } catch (...) {
    // A C++ host's sink that throws: the line is lost, nothing unwinds
    // through the plugin that logged.
  }
}

}  // namespace loader
}  // namespace ddph

extern "C" void ddph_set_log_sink(ddph_log_fn fn, void* user, ddph_log_level_t max_level) {
  using ddph::loader::Sink;
  std::shared_ptr<const Sink> sink;
  if (fn != nullptr) {
    try {
      sink = std::make_shared<const Sink>(Sink{fn, user, max_level});
    } catch (...) {
      return;  // out of memory: the sink before stays; nothing crosses the ABI
    }
  }
  std::atomic_store(&ddph::loader::g_sink, std::move(sink));
}
