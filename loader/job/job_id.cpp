#include "loader/job/job_id.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>

#include "core/base/error.h"

namespace ddph {
namespace loader {
namespace {

constexpr size_t kMaxJobIdLength = 64;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

bool is_valid_job_id(const std::string& id) {
  if (id.empty() || id.size() > kMaxJobIdLength) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

JobId resolve_job_id(const char* from_host, const std::string& from_yaml) {
  JobId job;
  if (from_host != nullptr) {
    job = {from_host, "ddph_session_options.job"};
  } else if (!from_yaml.empty()) {
    job = {from_yaml, "comm.job"};
  } else if (const char* v = env("DDPH_JOB_ID")) {
    job = {v, "DDPH_JOB_ID"};
  } else if (const char* run = env("TORCHELASTIC_RUN_ID");
             run != nullptr && std::string(run) != "none") {
    // torchrun's --rdzv_id; "none" is its default when none was given.
    job = {run, "TORCHELASTIC_RUN_ID"};
  } else {
    job = {"default", "the default (no comm.job, DDPH_JOB_ID or TORCHELASTIC_RUN_ID)"};
  }
  DDPH_CHECK(is_valid_job_id(job.id), DDPH_INVALID_ARGUMENT,
             job.source << " '" << job.id << "' is not a job id: use 1 to " << kMaxJobIdLength
                        << " letters, digits, '.', '_' or '-'");
  return job;
}

std::string new_job_id() {
  unsigned char bytes[12];
  DDPH_CHECK(RAND_bytes(bytes, sizeof bytes) == 1, DDPH_INTERNAL,
             "cannot draw random bytes for a job id (OpenSSL RAND_bytes failed)");
  static const char kHex[] = "0123456789abcdef";
  std::string id = "j";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

}  // namespace loader
}  // namespace ddph
