#include "tests/jobs/job_ranks.h"

#include <dirent.h>

#include <cmath>
#include <cstdio>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace ddph_test {

std::string job_yaml(const JobOpen& o) {
  std::string comm = "{backend: gloo, timeout: " + o.timeout;
  if (!o.yaml_job.empty()) comm += ", job: " + o.yaml_job;
  if (!o.extra_comm.empty()) comm += ", " + o.extra_comm;
  return "comm: " + comm + "}\nhook: {family: default, name: allreduce}\n";
}

Opened open_job(const JobOpen& o) {
  const std::string yaml = job_yaml(o);
  ddph_session_options_t opts{};
  opts.struct_size = sizeof opts;
  opts.yaml_text = yaml.c_str();
  opts.rank = o.rank;
  opts.world_size = o.world;
  opts.rendezvous = o.rendezvous.c_str();
  opts.job = o.option_job.empty() ? nullptr : o.option_job.c_str();
  Opened out;
  const auto t0 = std::chrono::steady_clock::now();
  ddph_error_t* e = ddph_session_open(&opts, &out.session);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.code = ddph_error_code(e);
  out.message = e != nullptr ? ddph_error_message(e) : "";
  ddph_error_free(e);
  return out;
}

float average_of(ddph_session_t* s, float value, std::string* message) {
  std::vector<float> data(4, value);
  FloatBucket b(data, 0, 0, true);
  if (run_bucket(s, b.bucket, message) != DDPH_OK) return NAN;
  return data[0];
}

int join_and_average(const JobOpen& o, float mine, float expected) {
  Opened s = open_job(o);
  DDPH_CHILD_CHECK(s.session != nullptr, "rank %d: %s", o.rank, s.message.c_str());
  std::string message;
  const float mean = average_of(s.session, mine, &message);
  ddph_session_close(s.session);
  DDPH_CHILD_CHECK(mean == expected, "rank %d (job '%s'): mean %g, expected %g (%s)", o.rank,
                   (o.yaml_job + o.option_job).c_str(), double(mean), double(expected),
                   message.c_str());
  return 0;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

}  // namespace ddph_test
