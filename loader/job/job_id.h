// The job id: every store key of a session lives under it, so that jobs that
// share a rendezvous directory or Redis server never meet.
#pragma once

#include <string>

namespace ddph {
namespace loader {

struct JobId {
  std::string id;
  std::string source;  // where it came from, for messages: "comm.job", "DDPH_JOB_ID", ...
};

// The first of: the host's ddph_session_options.job (from_host, may be
// NULL), the YAML's comm.job (from_yaml, may be empty), the environment's
// DDPH_JOB_ID, torchrun's TORCHELASTIC_RUN_ID (unless it is "none"), then
// "default". Throws DDPH_INVALID_ARGUMENT naming the source when the id is
// not 1 to 64 characters of [A-Za-z0-9._-].
JobId resolve_job_id(const char* from_host, const std::string& from_yaml);

// Whether id may be used as a job id (the rule above).
bool is_valid_job_id(const std::string& id);

// A fresh random id ("j" and 24 hex digits) for launchers that start every
// rank of a job themselves (ddph train, the Python launcher helpers).
std::string new_job_id();

}  // namespace loader
}  // namespace ddph
