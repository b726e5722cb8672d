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

// Names of the files in dir (not "." and "..").
std::vector<std::string> files_in(const std::string& dir);

// A TCP port on 127.0.0.1 that nothing listens on at the time of the call.
int free_port();

// A redis-server on 127.0.0.1:port (no persistence), started and waited for;
// its pid, or -1 when /usr/bin/redis-server is missing or does not start.
int start_redis(int port);

// Runs a redis-cli command against 127.0.0.1:port and returns its output.
std::string redis_cli(int port, const std::string& args);

}  // namespace ddph_test
