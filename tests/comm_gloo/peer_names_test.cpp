// A dead peer is named by its rank, process and host, and its address is
// printed with its real port (gloo prints the port's bytes swapped).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "tests/comm_gloo/harness.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

// The ports a rank listened on, from the address list gloo published for it
// (key "test/<r>", file "test%2F<r>" of the file store): one record per pair, each a
// sockaddr_storage (port in network order at bytes 2-3) and an 8-byte
// sequence number. gloo's own bytes are the reference for the real port.
constexpr size_t kGlooAddressBytes = 128 + 8;
std::set<int> published_ports(const std::string& store_dir, int rank) {
  std::ifstream in(store_dir + "/test%2F" + std::to_string(rank), std::ios::binary);
  const std::string v((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<int> ports;
  for (size_t at = 0; at + kGlooAddressBytes <= v.size(); at += kGlooAddressBytes) {
    const auto* b = reinterpret_cast<const unsigned char*>(v.data() + at);
    if ((b[0] | b[1] << 8) == AF_INET) ports.insert(b[2] << 8 | b[3]);
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
          std::ofstream(dir + "/victim") << getpid();
          raise(SIGKILL);
        }
        for (int i = 0; i < 50 && access((dir + "/victim").c_str(), F_OK) != 0; ++i) usleep(10000);
        usleep(100000);
        err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
        comm->destroy(comm->ctx);
        DDPH_CHILD_CHECK(!err.ok(), "the allreduce with a dead peer succeeded");
        int pid = 0;
        std::ifstream(dir + "/victim") >> pid;
        const std::set<int> ports = published_ports(dir + "/store", 1);
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        const std::string who =
            "rank 1 (pid " + std::to_string(pid) + " on host " + host + ", listening on 127.0.0.1:";
        const size_t at = err.message.find(who);
        DDPH_CHILD_CHECK(at != std::string::npos, "'%s' not in: %s", who.c_str(),
                         err.message.c_str());
        const int printed = std::atoi(err.message.c_str() + at + who.size());
        DDPH_CHILD_CHECK(ports.count(printed) == 1,
                         "printed port %d is not one gloo published for rank 1 (%zu ports): %s",
                         printed, ports.size(), err.message.c_str());
        return 0;
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].exit_code, 0) << ddph_test::describe(res);
}

}  // namespace
}  // namespace comm_gloo_test
