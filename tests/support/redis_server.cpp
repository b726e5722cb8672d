#include "tests/support/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace ddph_test {

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
  if (port <= 0 || access(server, X_OK) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    // Keep the test log readable: redis prints its banner even at "warning".
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
