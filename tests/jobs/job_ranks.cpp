#include "tests/jobs/job_ranks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <thread>

#include "tests/session_gloo/session_ranks.h"

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

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

int start_redis(int port) {
  const char* server = "/usr/bin/redis-server";
  if (access(server, X_OK) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    const std::string p = std::to_string(port);
    execl(server, server, "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly",
          "no", "--loglevel", "warning", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 500; ++i) {
    if (redis_cli(port, "PING").find("PONG") != std::string::npos) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::string redis_cli(int port, const std::string& args) {
  const std::string cmd =
      "redis-cli -h 127.0.0.1 -p " + std::to_string(port) + " " + args + " 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

}  // namespace ddph_test
