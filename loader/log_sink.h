// Where the log lines of the loader and its plugins go: the host's sink
// (ddph_set_log_sink) or stderr, with the rank of the session whose thread
// logged. Everything here is [thread-safe].
#pragma once

#include <ddph/ddph.h>

#include <cstdint>

namespace ddph {
namespace loader {

// Delivers one line: to the host's sink when one is set and level is at most
// its max_level, else to stderr when level is at most DDPH_LOG_LEVEL.
void deliver_log_line(ddph_log_level_t level, const char* family, const char* message);

// The level at or below which lines go to stderr when no sink is set (env
// DDPH_LOG_LEVEL: error, warn, info or debug, read once; default warn).
ddph_log_level_t log_threshold();

// The rank this thread logs for: the session's on its worker thread and
// while it opens or closes; -1 elsewhere.
int32_t thread_log_rank();
void set_thread_log_rank(int32_t rank);

// Sets this thread's rank for the scope (session open and close), then
// restores the one before (sessions may nest: one opens another's helper).
class ScopedLogRank {
 public:
  explicit ScopedLogRank(int32_t rank) : previous_(thread_log_rank()) { set_thread_log_rank(rank); }
  ~ScopedLogRank() { set_thread_log_rank(previous_); }
  ScopedLogRank(const ScopedLogRank&) = delete;
  ScopedLogRank& operator=(const ScopedLogRank&) = delete;

 private:
  int32_t previous_;
};

}  // namespace loader
}  // namespace ddph
