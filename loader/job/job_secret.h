// The shared secret of a job: when set, every value a rank writes to the
// rendezvous store carries an HMAC-SHA256 of it under the secret, and a
// value without a valid one is refused, so a process that can reach the
// store (a shared Redis server, a shared filesystem) but does not hold the
// secret cannot join the job.
#pragma once

#include <string>

namespace ddph {
namespace loader {

struct JobSecret {
  std::string bytes;   // empty: the job has no secret
  std::string source;  // "comm.secret_file '/path'" or "DDPH_JOB_SECRET_FILE '/path'"
};

// Reads the secret from the YAML's comm.secret_file (from_yaml, may be
// empty), else from the file DDPH_JOB_SECRET_FILE names, else none. The
// file must be a regular file of this user that nobody else may read or
// write (mode 0600 or stricter), holding 1 to 4096 bytes. Throws
// DDPH_INVALID_ARGUMENT naming the source and the problem.
JobSecret load_job_secret(const std::string& from_yaml);

// HMAC-SHA256 of data under key (32 bytes).
std::string hmac_sha256(const std::string& key, const std::string& data);

// Compares in time independent of where a and b differ.
bool equal_in_constant_time(const std::string& a, const std::string& b);

}  // namespace loader
}  // namespace ddph
