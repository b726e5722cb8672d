// A dead peer is named by its rank, process and host, and its end of the
// connection is printed with its real port (gloo prints ports with their
// bytes swapped).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "tests/comm_gloo/harness.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

// The remote ports of this process's TCP connections, from the kernel: the
// inodes of its socket descriptors matched against /proc/net/tcp's rows.
std::set<int> remote_ports() {
  std::set<std::string> inodes;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[64] = {};
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
  std::getline(tcp, line);  // the header
  while (std::getline(tcp, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    f >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
        inode;
    if (inodes.count(inode) != 0)
      ports.insert(int(std::stoul(remote.substr(remote.find(':') + 1), nullptr, 16)));
  }
  return ports;
}

// The addresses a rank listened on while connecting, as gloo published them
// (key "test/<rank>", file "test%2F<rank>" of the file store): one record
// per pair, a sockaddr_storage (for AF_INET the port in network order at
// bytes 2-3, the address at bytes 4-7) and an 8-byte sequence number.
struct Published {
  std::set<int> ports;
  std::set<std::string> addresses;  // dotted quads
};
Published published(const std::string& store_dir, int rank) {
  std::ifstream in(store_dir + "/test%2F" + std::to_string(rank), std::ios::binary);
  const std::string v((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Published p;
  for (size_t at = 0; at + 136 <= v.size(); at += 136) {
    const auto* b = reinterpret_cast<const unsigned char*>(v.data() + at);
    if ((b[0] | b[1] << 8) != AF_INET) continue;
    p.ports.insert(b[2] << 8 | b[3]);
    p.addresses.insert(std::to_string(b[4]) + "." + std::to_string(b[5]) + "." +
                       std::to_string(b[6]) + "." + std::to_string(b[7]));
  }
  return p;
}
std::set<int> listening_ports(const std::string& store_dir, int rank) {
  return published(store_dir, rank).ports;
}

bool exists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

TEST(CommGlooPeerNames, ADeadPeerIsNamedWithItsRealAddress) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        ddph_comm_t* comm = must_connect(rank, world, dir);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d did not connect", rank);
        Tensor t(kF32, 1 << 20);
        CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
        if (rank == 1) {
          for (int i = 0; i < 500 && !exists(dir + "/recorded"); ++i) usleep(10000);
          std::ofstream(dir + "/victim") << getpid();
          raise(SIGKILL);
        }
        // Where rank 1 may be: the far end of rank 0's connection to it, as
        // the kernel sees it while both live (rank 0 connected to it, or it
        // to rank 0), or the socket it listened on, as gloo published it.
        std::set<int> ports = remote_ports();
        for (int port : listening_ports(dir + "/store", 1)) ports.insert(port);
        std::ofstream(dir + "/recorded") << ports.size();
        for (int i = 0; i < 500 && !exists(dir + "/victim"); ++i) usleep(10000);
        usleep(100000);
        Err err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
        comm->destroy(comm->ctx);
        DDPH_CHILD_CHECK(!err.ok(), "the allreduce with a dead peer succeeded");
        int pid = 0;
        std::ifstream(dir + "/victim") >> pid;
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        const std::string who =
            "rank 1 (pid " + std::to_string(pid) + " on host " + host + ", at 127.0.0.1:";
        const size_t at = err.message.find(who);
        DDPH_CHILD_CHECK(at != std::string::npos, "'%s' not in: %s", who.c_str(),
                         err.message.c_str());
        const int printed = std::atoi(err.message.c_str() + at + who.size());
        DDPH_CHILD_CHECK(ports.count(printed) == 1,
                         "printed port %d is none of rank 1's %zu known ports: %s", printed,
                         ports.size(), err.message.c_str());
        return 0;
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].exit_code, 0) << ddph_test::describe(res);
}

// One config for all ranks, each rank its own address: DDPH_GLOO_HOSTNAME,
// set per process, is what every peer is told to connect to.
TEST(CommGlooPeerNames, EachRankListensOnTheAddressItsEnvironmentNames) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        const std::string mine = "127.0.0." + std::to_string(20 + rank);
        DDPH_CHILD_CHECK(setenv("DDPH_GLOO_HOSTNAME", mine.c_str(), 1) == 0, "setenv");
        ddph_comm_t* comm = must_connect(rank, world, dir);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d did not connect", rank);
        Tensor t(kF32, 1000);
        for (int i = 0; i < 1000; ++i) t.as<float>()[i] = float(rank + 1);
        CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
        comm->destroy(comm->ctx);
        DDPH_CHILD_CHECK(t.as<float>()[999] == 3.0f, "sum %g", double(t.as<float>()[999]));
        const Published p = published(dir + "/store", rank);
        DDPH_CHILD_CHECK(p.addresses.size() == 1 && *p.addresses.begin() == mine,
                         "rank %d published %zu addresses, first %s, not %s", rank,
                         p.addresses.size(),
                         p.addresses.empty() ? "-" : p.addresses.begin()->c_str(), mine.c_str());
        return 0;
      },
      30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
}  // namespace comm_gloo_test
