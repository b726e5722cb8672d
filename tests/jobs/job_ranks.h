// Ranks of the job-identity, store-access and timeout tests: sessions opened
// through the public API with an explicit job id, rendezvous and timeout.
#pragma once

#include <ddph/ddph.h>

#include <chrono>
#include <string>
#include <vector>

namespace ddph_test {

struct JobOpen {
  int rank = 0, world = 1;
  std::string rendezvous;      // "file:///dir" or "redis://..."
  std::string yaml_job;        // comm.job ("" leaves it out)
  std::string option_job;      // ddph_session_options.job ("" passes NULL)
  std::string timeout = "5s";  // comm.timeout
  std::string extra_comm;      // more "key: value" pairs for the comm section
};

// The YAML text of a default/allreduce job with o's comm section.
std::string job_yaml(const JobOpen& o);

struct Opened {
  ddph_session_t* session = nullptr;  // NULL on failure
  ddph_code_t code = DDPH_OK;
  std::string message;
  double seconds = 0;  // how long ddph_session_open took
};
Opened open_job(const JobOpen& o);

// Averages {value, value, value, value} across the session's ranks with one
// bucket; returns the element (NaN and the message on failure).
float average_of(ddph_session_t* s, float value, std::string* message);

// For a rank's body: opens o's session, averages `mine` across the ranks and
// closes it; 0 when the mean is `expected`, else prints why and returns 1.
int join_and_average(const JobOpen& o, float mine, float expected);

// Names of the files in dir (not "." and "..").
std::vector<std::string> files_in(const std::string& dir);

}  // namespace ddph_test
