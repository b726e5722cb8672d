// Runs one check in a fork()ed child with a deadline, so that a plugin that
// crashes or hangs costs one FAIL row instead of the validator.
#pragma once

#include <functional>
#include <string>

namespace ddph::plugin_checks {

enum class Status { kPass, kFail, kSkip };

struct Outcome {
  Status status = Status::kFail;
  std::string detail;  // one line for the table; data lines for the inventory
};

// Forks; the child runs check() and sends its Outcome back through a pipe.
// A child killed by a signal becomes kFail "crashed: SIGSEGV (...)", one
// still running after timeout_s is killed and becomes "hung after Ns", one
// that exits without answering becomes "exited with status N". The child's
// stdout and stderr go to /dev/null unless keep_output.
Outcome run_isolated(const std::function<Outcome()>& check, double timeout_s, bool keep_output);

// Inside a check: what it is about to do. Should the child then crash or
// hang, the FAIL row says so ("crashed: SIGSEGV ... while: NULL buffer
// data"). A no-op outside run_isolated.
void note(const std::string& what);

}  // namespace ddph::plugin_checks
