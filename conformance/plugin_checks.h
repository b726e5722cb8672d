// The plugin contract as a list of checks, each run in its own child process
// (isolate.h): `ddph validate-plugin` prints them as a table
// and tests/conformance runs them on every plugin the build makes.
#pragma once

#include <string>
#include <vector>

#include "conformance/isolate.h"

namespace ddph::plugin_checks {

struct Row {
  std::string check;  // e.g. "run_bucket n=1000"
  std::string hook;   // hook name, "comm:<backend>", or "-" for the plugin itself
  Status status = Status::kFail;
  std::string detail;
};

struct ValidateOptions {
  double timeout_s = 20;     // per check
  bool keep_output = false;  // let the plugin's own stdout/stderr through
};

// Runs every check on the shared object at path. Never crashes or hangs on
// a broken plugin: each defect becomes a kFail row.
std::vector<Row> validate_plugin(const std::string& path, const ValidateOptions& options);

const char* status_name(Status s);  // "PASS", "FAIL", "SKIP"

}  // namespace ddph::plugin_checks
