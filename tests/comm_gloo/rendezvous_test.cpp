// Rendezvous through Redis, rank 0's tcp:// store, a host-provided
// ddph_store_t, and two sessions sharing one file store under different
// prefixes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/comm_gloo/harness.h"
#include "tests/support/host.h"
#include "tests/support/multiprocess.h"
#include "tests/support/redis_server.h"

namespace comm_gloo_test {
namespace {

// Every rank sums (rank + 1) * (i + 1) and checks the result.
int sum_check(ddph_comm_t* comm, int rank, int world) {
  Tensor t(kF32, 8);
  for (int i = 0; i < 8; ++i) t.as<float>()[i] = float((rank + 1) * (i + 1));
  Err e = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
  DDPH_CHILD_CHECK(e.ok(), "rank %d allreduce: %s", rank, e.text().c_str());
  for (int i = 0; i < 8; ++i)
    DDPH_CHILD_CHECK(t.as<float>()[i] == float(world * (world + 1) / 2 * (i + 1)), "[%d] = %g", i,
                     double(t.as<float>()[i]));
  return 0;
}

// Connects rank of world through the URL's store alone (no session),
// checks a sum, and closes: what the Redis and tcp:// rendezvous tests do.
int connect_by_url_and_sum(int rank, int world, const std::string& url, const std::string& prefix) {
  Connect c;
  c.rank = rank;
  c.world = world;
  c.rendezvous = url;
  c.prefix = prefix;
  Err err;
  ddph_comm_t* comm = connect(c, &err);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
  int rc = sum_check(comm, rank, world);
  comm->destroy(comm->ctx);
  return rc;
}

TEST(CommGlooRendezvous, Redis) {
  const int port = ddph_test::free_port();
  const int redis = ddph_test::start_redis(port);
  if (redis < 0) GTEST_SKIP() << "redis-server is not installed or did not start";
  const std::string url = "redis://127.0.0.1:" + std::to_string(port);
  for (int world : {2, 3}) {
    auto res = ddph_test::run_ranks(
        world,
        [&](int rank, int w, const std::string&) {
          return connect_by_url_and_sum(rank, w, url, "redis-world" + std::to_string(w));
        },
        30);
    EXPECT_TRUE(ddph_test::all_passed(res)) << world << " ranks: " << ddph_test::describe(res);
  }
  kill(redis, SIGTERM);
  waitpid(redis, nullptr, 0);
}

// A communicator opened on its own (init.rendezvous, no session) at rank
// 0's tcp:// store: rank 0 serves it, for as long as its communicator lives.
TEST(CommGlooRendezvous, TcpRankZeroServes) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(ddph_test::free_port());
  auto res = ddph_test::run_ranks(
      3,
      [&](int rank, int w, const std::string&) {
        return connect_by_url_and_sum(rank, w, url, "tcp-world");
      },
      30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(CommGlooRendezvous, UnreachableRedisIsACommFailure) {
  Connect c;
  c.rendezvous = "redis://127.0.0.1:" + std::to_string(ddph_test::free_port());
  Err err;
  EXPECT_EQ(connect(c, &err), nullptr);
  EXPECT_EQ(err.code, DDPH_COMM_FAILURE) << err.text();
  EXPECT_NE(err.message.find("Redis"), std::string::npos) << err.message;
}

// A host store over files in a directory: one file per key, written to a
// temporary name and renamed so readers never see half a value. Keys are
// hex-encoded since they contain '/'. Deliberately not gloo's FileStore.
struct DirStore {
  std::string dir;
  int sets = 0, gets = 0;  // per process: proves the plugin used this store
};

std::string key_path(const DirStore* s, const char* key) {
  std::string p = s->dir + "/k";
  char hex[3];
  for (const char* c = key; *c; ++c) {
    std::snprintf(hex, sizeof hex, "%02x", unsigned(static_cast<unsigned char>(*c)));
    p += hex;
  }
  return p;
}

ddph_error_t* dir_set(void* ctx, const char* key, const void* value, size_t n) {
  auto* s = static_cast<DirStore*>(ctx);
  ++s->sets;
  std::string path = key_path(s, key), tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(static_cast<const char*>(value), std::streamsize(n));
    if (!out) return ddph_host()->error_new(DDPH_COMM_FAILURE, "dir store: cannot write");
  }
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return ddph_host()->error_new(DDPH_COMM_FAILURE, "dir store: cannot rename");
  return nullptr;
}

ddph_error_t* dir_get(void* ctx, const char* key, int64_t timeout_ms, ddph_write_fn write,
                      void* sink) {
  auto* s = static_cast<DirStore*>(ctx);
  ++s->gets;
  std::string path = key_path(s, key);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      std::string v = ss.str();
      write(sink, v.data(), v.size());
      return nullptr;
    }
    if (std::chrono::steady_clock::now() > deadline)
      return ddph_host()->error_new(DDPH_TIMEOUT,
                                    (std::string("dir store: no key '") + key + "'").c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

ddph_store_t dir_store_table(DirStore* s) {
  ddph_store_t t{};
  t.struct_size = sizeof t;
  t.ctx = s;
  t.set = &dir_set;
  t.get = &dir_get;
  return t;
}

TEST(CommGlooRendezvous, HostStoreThreeRanks) {
  auto res = ddph_test::run_ranks(
      3,
      [](int rank, int world, const std::string& dir) {
        DirStore store{dir};
        ddph_store_t table = dir_store_table(&store);
        Connect c;
        c.rank = rank;
        c.world = world;
        c.store = &table;
        c.rendezvous = "ftp://ignored-when-a-store-is-given";
        Err err;
        ddph_comm_t* comm = connect(c, &err);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
        DDPH_CHILD_CHECK(store.sets >= 1 && store.gets >= world - 1, "sets %d gets %d", store.sets,
                         store.gets);
        int rc = sum_check(comm, rank, world);
        comm->destroy(comm->ctx);
        return rc;
      },
      30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(CommGlooRendezvous, HostStoreTimeoutIsATimeout) {
  // Rank 1 of 2 alone: the host store's DDPH_TIMEOUT comes back as such.
  std::string dir = ddph_test::make_temp_dir("ddph-hoststore");
  DirStore store{dir};
  ddph_store_t table = dir_store_table(&store);
  Connect c;
  c.rank = 1;
  c.world = 2;
  c.store = &table;
  c.timeout_ms = 300;
  Err err;
  const double t0 = now_s();
  EXPECT_EQ(connect(c, &err), nullptr);
  EXPECT_EQ(err.code, DDPH_TIMEOUT) << err.text();
  EXPECT_NE(err.message.find("dir store: no key"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("rank 1"), std::string::npos) << err.message;
  EXPECT_LT(seconds_since(t0), 3.0);
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(CommGlooRendezvous, SessionsShareAFileStoreByPrefixAndDirIsCreated) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        // A nested directory that does not exist yet.
        const std::string url = file_url(dir + "/not/yet/there");
        ddph_comm_t* comms[2] = {nullptr, nullptr};
        for (int s = 0; s < 2; ++s) {
          Connect c;
          c.rank = rank;
          c.world = world;
          c.rendezvous = url;
          c.prefix = "session" + std::to_string(s);
          Err err;
          comms[s] = connect(c, &err);
          DDPH_CHILD_CHECK(comms[s] != nullptr, "rank %d session %d: %s", rank, s,
                           err.text().c_str());
        }
        for (ddph_comm_t* comm : comms) {
          if (sum_check(comm, rank, world) != 0) return 1;
          comm->destroy(comm->ctx);
        }
        return 0;
      },
      30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
}  // namespace comm_gloo_test
