// A dead peer is named by its rank, process and host, and its address is
// printed with its real port (gloo prints the port's bytes swapped).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/comm_gloo/harness.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

// The TCP ports this process listens on, from /proc: the inodes of its
// socket descriptors, matched against /proc/net/tcp's LISTEN (0A) rows.
std::set<int> listening_ports() {
  std::set<std::string> inodes;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[256] = {};
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
      const std::string t(target, n > 0 ? size_t(n) : 0);
      if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
    }
    closedir(d);
  }
  std::set<int> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
    f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
    if (state == "0A" && inodes.count(inode))
      ports.insert(int(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
  }
  return ports;
}

TEST(CommGlooPeerNames, ADeadPeerIsNamedWithItsRealAddress) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        Connect c;
        c.rank = rank;
        c.world = world;
        c.rendezvous = file_url(dir + "/store");
        Err err;
        ddph_comm_t* comm = connect(c, &err);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
        Tensor t(kF32, 1 << 20);
        CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
        if (rank == 1) {
          std::ofstream out(dir + "/victim");
          out << getpid();
          for (int port : listening_ports()) out << " " << port;
          out.close();
          raise(SIGKILL);
        }
        for (int i = 0; i < 50 && access((dir + "/victim").c_str(), F_OK) != 0; ++i) usleep(10000);
        usleep(100000);
        err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
        comm->destroy(comm->ctx);
        DDPH_CHILD_CHECK(!err.ok(), "the allreduce with a dead peer succeeded");
        std::ifstream in(dir + "/victim");
        int pid = 0, port = 0;
        std::set<int> ports;
        in >> pid;
        while (in >> port) ports.insert(port);
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        const std::string who =
            "rank 1 (pid " + std::to_string(pid) + " on host " + host + ", listening on 127.0.0.1:";
        const size_t at = err.message.find(who);
        DDPH_CHILD_CHECK(at != std::string::npos, "'%s' not in: %s", who.c_str(),
                         err.message.c_str());
        const int printed = std::atoi(err.message.c_str() + at + who.size());
        DDPH_CHILD_CHECK(ports.count(printed) == 1,
                         "printed port %d is not one rank 1 listened on (%zu ports): %s", printed,
                         ports.size(), err.message.c_str());
        return 0;
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].exit_code, 0) << ddph_test::describe(res);
}

}  // namespace
}  // namespace comm_gloo_test
