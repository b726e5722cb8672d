// The tcp:// store rank 0 serves, in one process: rank 0's store and its
// clients (each a TcpStore of another rank, as in another process) on a
// loopback port nobody else uses. What it must do: serve set, add, get and
// erase to several clients at once; bound every wait by its deadline,
// naming the missing key or the unreachable address; refuse a taken port,
// a client of another job and a client without the job's secret at once,
// both sides saying why; and fail at once, naming rank 0's store, when the
// server goes away under a rank that has keys there.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/base/error.h"
#include "core/comm/rendezvous/kv_store.h"
#include "core/comm/rendezvous/tcp_protocol.h"
#include "core/comm/rendezvous/tcp_socket.h"
#include "core/comm/rendezvous_url.h"
#include "tests/support/redis_server.h"

namespace ddph {
namespace rendezvous {
namespace {

using namespace std::chrono_literals;
using Seconds = std::chrono::duration<double>;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string url_of(int port) {
  return "tcp://127.0.0.1:" + std::to_string(port);
}

// A stand-in for the loader's HMAC, enough to tell two secrets apart: the
// protocol is what is under test here (the session tests use the real one).
StoreAccess job_with_secret(const std::string& job, const std::string& secret) {
  StoreAccess a;
  a.job = job;
  if (!secret.empty())
    a.sign = [secret](const std::string& data) {
      return "mac(" + secret + "," + std::to_string(std::hash<std::string>()(data)) + ")";
    };
  return a;
}

std::unique_ptr<KvStore> open(int port, int rank, const std::string& job = "unit",
                              const std::string& secret = "") {
  return open_url_store(url_of(port), rank, 0ms, job_with_secret(job, secret));
}

// The error an action threw (code DDPH_OK and "" when it threw none), and
// how long it took.
struct Thrown {
  ddph_code_t code = DDPH_OK;
  std::string message;
  double seconds = 0;
};

template <class Action>
Thrown thrown_by(Action&& action) {
  Thrown t;
  const auto t0 = Clock::now();
  try {
    action();
  } catch (const Error& e) {
    t.code = e.code();
    t.message = e.what();
  }
  t.seconds = Seconds(Clock::now() - t0).count();
  return t;
}

TEST(TcpStore, ServesSetAddGetAndEraseToSeveralClients) {
  const int port = ddph_test::free_port();
  auto root = open(port, 0);
  auto one = open(port, 1);
  auto two = open(port, 2);
  const std::string binary("a\0b\xff", 4);
  const std::string big(3 << 20, 'x');  // more than one read of the server
  one->set("k/binary", binary, deadline_in(5s));
  two->set("k/big", big, deadline_in(5s));
  EXPECT_EQ(root->get("k/binary", deadline_in(5s)), binary);
  EXPECT_EQ(one->get("k/big", deadline_in(5s)), big);
  // Rank 0 writes to the keys it serves; the clients read them.
  root->set("k/root", "from rank 0", deadline_in(5s));
  EXPECT_EQ(two->get("k/root", deadline_in(5s)), "from rank 0");
  // set replaces.
  two->set("k/root", "replaced", deadline_in(5s));
  EXPECT_EQ(root->get("k/root", deadline_in(5s)), "replaced");

  // add is atomic: of three ranks racing for a key, one wins, and every
  // rank reads the winner's value.
  KvStore* stores[] = {root.get(), one.get(), two.get()};
  std::atomic<int> winners{0};
  std::vector<std::thread> racers;
  for (int r = 0; r < 3; ++r)
    racers.emplace_back([&, r] {
      if (stores[r]->add("k/claim", "rank " + std::to_string(r), deadline_in(5s))) ++winners;
    });
  for (auto& t : racers) t.join();
  EXPECT_EQ(winners.load(), 1);
  const std::string winner = root->get("k/claim", deadline_in(5s));
  EXPECT_EQ(one->get("k/claim", deadline_in(5s)), winner);
  EXPECT_FALSE(two->add("k/claim", "late", deadline_in(5s)));

  // Several keys in one request, found or not, in order.
  std::vector<std::string> values;
  std::vector<bool> found;
  one->try_get_many({"k/missing", "k/binary", "k/claim"}, &values, &found, deadline_in(5s));
  ASSERT_EQ(found.size(), 3u);
  EXPECT_FALSE(found[0]);
  EXPECT_TRUE(found[1]);
  EXPECT_TRUE(found[2]);
  EXPECT_EQ(values[1], binary);
  EXPECT_EQ(values[2], winner);

  // erase removes for everyone; a missing key is no error.
  two->erase("k/binary", deadline_in(5s));
  std::string value;
  EXPECT_FALSE(root->try_get("k/binary", &value, deadline_in(5s)));
  EXPECT_FALSE(one->try_get("k/binary", &value, deadline_in(5s)));
  one->erase("k/never-was", deadline_in(5s));

  // A waiter sees a key written after it started waiting.
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    two->set("k/later", "late value", deadline_in(5s));
  });
  EXPECT_EQ(one->get("k/later", deadline_in(10s)), "late value");
  writer.join();
}

TEST(TcpStore, AWaitForAKeyNobodySetsEndsAtItsDeadlineNamingTheKey) {
  const int port = ddph_test::free_port();
  auto root = open(port, 0);
  auto one = open(port, 1);
  const auto timeout = 400ms;
  Thrown t = thrown_by([&] { one->get("k/never", deadline_in(timeout)); });
  EXPECT_EQ(t.code, DDPH_TIMEOUT) << t.message;
  EXPECT_TRUE(contains(t.message, "rank 0's tcp store at 127.0.0.1:" + std::to_string(port)))
      << t.message;
  EXPECT_TRUE(contains(t.message, "'k/never' did not appear in time")) << t.message;
  EXPECT_GE(t.seconds, Seconds(timeout).count());
  EXPECT_LT(t.seconds, 4 * Seconds(timeout).count()) << "the wait overran its deadline";
}

TEST(TcpStore, WithoutRankZeroAClientFailsAtItsDeadlineNamingTheAddress) {
  const int port = ddph_test::free_port();  // nobody listens there
  auto one = open(port, 1);
  const auto timeout = 500ms;
  Thrown t = thrown_by([&] { one->get("k", deadline_in(timeout)); });
  EXPECT_EQ(t.code, DDPH_TIMEOUT) << t.message;
  EXPECT_TRUE(contains(
      t.message, "rank 1 cannot reach rank 0's tcp store at 127.0.0.1:" + std::to_string(port)))
      << t.message;
  EXPECT_TRUE(contains(t.message, "Connection refused")) << t.message;
  EXPECT_TRUE(contains(t.message, "MASTER_ADDR and MASTER_PORT")) << t.message;
  EXPECT_GE(t.seconds, Seconds(timeout).count());
  EXPECT_LT(t.seconds, 4 * Seconds(timeout).count()) << "the connect overran its deadline";
}

// Another program's socket listening on 127.0.0.1:port, in *fd.
bool listen_on(int port, tcp::Fd* fd) {
  *fd = tcp::Fd(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  return bind(fd->get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
         listen(fd->get(), 4) == 0;
}

// Another program on the port that takes connections and never answers:
// the client's wait ends at its deadline saying so.
TEST(TcpStore, ASilentProgramOnThePortIsATimeoutNamingIt) {
  const int port = ddph_test::free_port();
  tcp::Fd silent;
  ASSERT_TRUE(listen_on(port, &silent));  // the kernel accepts; nobody answers
  auto one = open(port, 1);
  const auto timeout = 400ms;
  Thrown t = thrown_by([&] { one->get("k", deadline_in(timeout)); });
  EXPECT_EQ(t.code, DDPH_TIMEOUT) << t.message;
  EXPECT_TRUE(contains(t.message, "did not finish the handshake in time")) << t.message;
  EXPECT_GE(t.seconds, Seconds(timeout).count());
  EXPECT_LT(t.seconds, 4 * Seconds(timeout).count()) << "the handshake overran its deadline";
}

TEST(TcpStore, AClientWaitsForRankZeroToComeUp) {
  const int port = ddph_test::free_port();
  auto one = open(port, 1);
  std::unique_ptr<KvStore> root;
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    root = open(port, 0);
    root->set("k/ready", "yes", deadline_in(5s));
  });
  Thrown t = thrown_by([&] { EXPECT_EQ(one->get("k/ready", deadline_in(20s)), "yes"); });
  late.join();
  EXPECT_EQ(t.code, DDPH_OK) << t.message;
}

TEST(TcpStore, ATakenPortIsRefusedOnRankZero) {
  const int port = ddph_test::free_port();
  // Another process's server on the port (here a plain listening socket).
  tcp::Fd other;
  ASSERT_TRUE(listen_on(port, &other));
  Thrown t = thrown_by([&] { open(port, 0); });
  EXPECT_EQ(t.code, DDPH_INVALID_ARGUMENT) << t.message;
  EXPECT_TRUE(contains(t.message, url_of(port) + ": port " + std::to_string(port) + " is in use"))
      << t.message;
  EXPECT_TRUE(contains(t.message, "choose another MASTER_PORT")) << t.message;
  other.reset();
  // A second rank 0 on the port of a running one: the same.
  auto root = open(port, 0);
  Thrown again = thrown_by([&] { open(port, 0, "other-job"); });
  EXPECT_EQ(again.code, DDPH_INVALID_ARGUMENT) << again.message;
  EXPECT_TRUE(contains(again.message, "is in use")) << again.message;
}

TEST(TcpStore, AClientOfAnotherJobIsRefusedAtOnceOnBothSides) {
  const int port = ddph_test::free_port();
  auto root = open(port, 0, "job-a");
  auto stranger = open(port, 1, "job-b");
  Thrown t = thrown_by([&] { stranger->get("k", deadline_in(20s)); });
  EXPECT_EQ(t.code, DDPH_INVALID_ARGUMENT) << t.message;
  EXPECT_TRUE(contains(t.message, "job 'job-b' (rank 1)")) << t.message;
  EXPECT_TRUE(contains(t.message, "serves job 'job-a', not this one")) << t.message;
  EXPECT_LT(t.seconds, 10.0) << "refused at once, not at the deadline";
  // Rank 0's side: its wait for the stranger's key says whom it refused.
  Thrown wait = thrown_by([&] { root->get("k/from-rank-1", deadline_in(100ms)); });
  EXPECT_EQ(wait.code, DDPH_TIMEOUT) << wait.message;
  EXPECT_TRUE(contains(wait.message, "refused 1 connection")) << wait.message;
  EXPECT_TRUE(contains(wait.message, "refused rank 1 (pid " + std::to_string(getpid())))
      << wait.message;
  EXPECT_TRUE(contains(wait.message, "of job 'job-b': this store serves job 'job-a'"))
      << wait.message;
  // The job's own ranks are still served.
  auto member = open(port, 1, "job-a");
  member->set("k", "v", deadline_in(5s));
  EXPECT_EQ(root->get("k", deadline_in(5s)), "v");
}

TEST(TcpStore, AClientWithoutTheJobsSecretIsRefusedOnBothSides) {
  struct Case {
    std::string server_secret, client_secret, client_says, server_says;
  };
  const Case cases[] = {
      {"s3cret", "", "admits only ranks that hold the job's secret, and this rank (1) has none",
       "of job 'unit': it holds no secret, and this job has one"},
      {"", "s3cret", "this rank (1) holds a secret, and rank 0",
       "of job 'unit': it holds a secret, and this job has none"},
      {"s3cret", "other", "did not prove it holds this rank's secret",
       "refused this store: it holds another secret than this job's"},
  };
  for (const Case& c : cases) {
    const int port = ddph_test::free_port();
    auto root = open(port, 0, "unit", c.server_secret);
    auto client = open(port, 1, "unit", c.client_secret);
    Thrown t = thrown_by([&] { client->set("k", "v", deadline_in(20s)); });
    EXPECT_EQ(t.code, DDPH_INVALID_ARGUMENT) << t.message;
    EXPECT_TRUE(contains(t.message, c.client_says)) << t.message;
    EXPECT_LT(t.seconds, 10.0) << "refused at once, not at the deadline";
    // The refusal reaches the server when the client tells it why; give its
    // thread the moment it needs to note it.
    std::string said;
    for (int i = 0; i < 500 && said.empty(); ++i) {
      said = root->last_miss();
      if (said.empty()) std::this_thread::sleep_for(10ms);
    }
    EXPECT_TRUE(contains(said, c.server_says)) << said;
    std::string value;
    EXPECT_FALSE(root->try_get("k", &value, deadline_in(1s))) << "the refused client wrote";
  }
  // The same secret on both sides: served.
  const int port = ddph_test::free_port();
  auto root = open(port, 0, "unit", "s3cret");
  auto client = open(port, 1, "unit", "s3cret");
  client->set("k", "v", deadline_in(5s));
  EXPECT_EQ(root->get("k", deadline_in(5s)), "v");
  EXPECT_EQ(root->last_miss(), "");
}

// A client that skips the check of the server's proof and sends a proof it
// cannot have made: the server itself must check it.
TEST(TcpStore, TheServerChecksTheClientsProof) {
  const int port = ddph_test::free_port();
  auto root = open(port, 0, "unit", "s3cret");
  std::string why;
  bool retry = true;
  tcp::Fd fd = tcp::connect_once("127.0.0.1", port, deadline_in(5s), &why, &retry);
  ASSERT_TRUE(fd.valid()) << why;
  tcp::Hello hello;
  hello.rank = 7;
  hello.host = "liar";
  hello.job = "unit";
  hello.has_secret = true;
  hello.nonce = std::string(tcp::kNonceBytes, 'n');
  std::string body;
  ASSERT_EQ(tcp::send_frame(fd.get(), tcp::encode(hello), deadline_in(5s), &why), tcp::Io::kOk);
  ASSERT_EQ(tcp::recv_frame(fd.get(), &body, deadline_in(5s), &why), tcp::Io::kOk) << why;
  const tcp::Greeting g = tcp::decode_greeting(body);
  ASSERT_EQ(g.verdict, tcp::kAccepted) << g.why;
  tcp::Proof proof;
  proof.accepts = true;
  proof.proof = std::string(tcp::kProofBytes, 'p');
  ASSERT_EQ(tcp::send_frame(fd.get(), tcp::encode(proof), deadline_in(5s), &why), tcp::Io::kOk);
  ASSERT_EQ(tcp::recv_frame(fd.get(), &body, deadline_in(5s), &why), tcp::Io::kOk) << why;
  const tcp::Answer answer = tcp::decode_answer(body);
  EXPECT_EQ(answer.verdict, tcp::kRefused);
  EXPECT_TRUE(contains(answer.why, "its proof does not match this job's secret")) << answer.why;
  EXPECT_TRUE(contains(root->last_miss(), "rank 7 (pid 0 on host liar)")) << root->last_miss();
  // And it closed the connection: a request gets no answer.
  tcp::Request r;
  r.op = tcp::kSet;
  r.keys = {"k"};
  tcp::send_frame(fd.get(), tcp::encode(r), deadline_in(5s), &why);
  EXPECT_EQ(tcp::recv_frame(fd.get(), &body, deadline_in(5s), &why), tcp::Io::kClosed);
}

TEST(TcpStore, SomethingElseOnThePortIsNotServedAndTheJobGoesOn) {
  const int port = ddph_test::free_port();
  auto root = open(port, 0);
  std::string why;
  bool retry = true;
  tcp::Fd junk = tcp::connect_once("127.0.0.1", port, deadline_in(5s), &why, &retry);
  ASSERT_TRUE(junk.valid()) << why;
  const std::string http = "GET / HTTP/1.0\r\n\r\n";  // a frame "length" of 542 MB
  ASSERT_EQ(send(junk.get(), http.data(), http.size(), MSG_NOSIGNAL), ssize_t(http.size()));
  std::string body;
  EXPECT_EQ(tcp::recv_frame(junk.get(), &body, deadline_in(5s), &why), tcp::Io::kClosed);
  EXPECT_TRUE(contains(root->last_miss(), "not a ddph rank")) << root->last_miss();
  auto one = open(port, 1);
  one->set("k", "v", deadline_in(5s));
  EXPECT_EQ(root->get("k", deadline_in(5s)), "v");
}

TEST(TcpStore, WhenRankZeroGoesARankWithKeysThereFailsAtOnceNamingIt) {
  const int port = ddph_test::free_port();
  auto root = open(port, 0);
  auto one = open(port, 1);
  one->set("k/mine", "v", deadline_in(5s));
  root.reset();  // rank 0's session closed, or its process ended
  Thrown t = thrown_by([&] { one->get("k/yours", deadline_in(20s)); });
  EXPECT_EQ(t.code, DDPH_COMM_FAILURE) << t.message;
  EXPECT_TRUE(contains(t.message, "rank 0's tcp store at 127.0.0.1:" + std::to_string(port)))
      << t.message;
  EXPECT_TRUE(contains(t.message, "rank 0 ended or failed")) << t.message;
  EXPECT_LT(t.seconds, 10.0) << "failed at once, not at the deadline";
  // Every later call too, even with rank 0's next server up: its keys are
  // not this rank's.
  auto next = open(port, 0);
  Thrown later = thrown_by([&] { one->get("k/mine", deadline_in(20s)); });
  EXPECT_EQ(later.code, DDPH_COMM_FAILURE) << later.message;
  EXPECT_LT(later.seconds, 10.0);
}

// A child that rank 0's process forks while it serves (a data loader's
// workers) keeps neither the port nor the clients' connections: once rank
// 0's store is gone, the next rank 0 can listen on the port and a client
// hears at once that rank 0 went, however long the child lives.
TEST(TcpStore, AChildForkedWhileRankZeroServesKeepsNeitherItsPortNorItsClients) {
  const int port = ddph_test::free_port();
  auto root = open(port, 0);
  auto one = open(port, 1);
  one->set("k/mine", "v", deadline_in(5s));
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    // fork has returned here: the child's fork handlers have run.
    const char up = 1;
    if (write(ready[1], &up, 1) != 1) _exit(1);
    sleep(5);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  char up = 0;
  ASSERT_EQ(read(ready[0], &up, 1), 1);
  close(ready[0]);
  close(ready[1]);
  root.reset();
  Thrown reopen = thrown_by([&] { root = open(port, 0); });
  Thrown t = thrown_by([&] { one->get("k/yours", deadline_in(20s)); });
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(reopen.code, DDPH_OK) << reopen.message;
  EXPECT_EQ(t.code, DDPH_COMM_FAILURE) << t.message;
  EXPECT_LT(t.seconds, 2.5) << "the client heard of rank 0's end only when the child ended";
}

// A rank that opens the job's next session while rank 0 still serves the
// last one meets the next server once the last one goes.
TEST(TcpStore, ARankThatWroteNothingMeetsRankZerosNextServer) {
  const int port = ddph_test::free_port();
  auto first = open(port, 0);
  auto one = open(port, 1);
  std::string value;
  EXPECT_FALSE(one->try_get("k/run", &value, deadline_in(5s)));  // connected to `first`
  std::thread restart([&] {
    std::this_thread::sleep_for(200ms);
    first.reset();
    auto second = open(port, 0);
    second->set("k/run", "the next run", deadline_in(5s));
    std::this_thread::sleep_for(2s);  // serves while the reader reads
  });
  Thrown t = thrown_by([&] { EXPECT_EQ(one->get("k/run", deadline_in(20s)), "the next run"); });
  restart.join();
  EXPECT_EQ(t.code, DDPH_OK) << t.message;
}

TEST(TcpStore, EnvReadsMasterAddrAndMasterPort) {
  const int port = ddph_test::free_port();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  RendezvousUrl u = parse_rendezvous_url("env://");
  EXPECT_EQ(u.kind, RendezvousUrl::kTcp);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, port);
  {
    auto root = open_url_store("env://", 0, 0ms, job_with_secret("unit", ""));
    auto one = open_url_store("env://", 1, 0ms, job_with_secret("unit", ""));
    one->set("k", "v", deadline_in(5s));
    EXPECT_EQ(root->get("k", deadline_in(5s)), "v");
    EXPECT_EQ(root->describe(), "rank 0's tcp store at 127.0.0.1:" + std::to_string(port));
  }
  // Under torchrun's agent store, torchrun listens on MASTER_PORT: rank 0
  // serves on the port after it, unless DDPH_MASTER_PORT names one.
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  u = parse_rendezvous_url("env://");
  EXPECT_EQ(u.port, port + 1);
  EXPECT_TRUE(contains(u.from_env, "MASTER_PORT=" + std::to_string(port) + " + 1")) << u.from_env;
  setenv("DDPH_MASTER_PORT", "4242", 1);
  u = parse_rendezvous_url("env://");
  EXPECT_EQ(u.port, 4242);
  EXPECT_TRUE(contains(u.from_env, "DDPH_MASTER_PORT=4242")) << u.from_env;
  setenv("DDPH_MASTER_PORT", "0", 1);
  Thrown bad_own = thrown_by([] { parse_rendezvous_url("env://"); });
  EXPECT_TRUE(contains(bad_own.message, "DDPH_MASTER_PORT='0' is not a port number"))
      << bad_own.message;
  unsetenv("DDPH_MASTER_PORT");
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  setenv("MASTER_PORT", "http", 1);
  Thrown bad_port = thrown_by([] { parse_rendezvous_url("env://"); });
  EXPECT_EQ(bad_port.code, DDPH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(bad_port.message, "MASTER_PORT='http' is not a port number"))
      << bad_port.message;
  unsetenv("MASTER_PORT");
  Thrown no_port = thrown_by([] { parse_rendezvous_url("env://"); });
  EXPECT_TRUE(contains(no_port.message, "MASTER_PORT is not set")) << no_port.message;
  unsetenv("MASTER_ADDR");
  Thrown no_addr = thrown_by([] { parse_rendezvous_url("env://"); });
  EXPECT_TRUE(contains(no_addr.message, "MASTER_ADDR is not set")) << no_addr.message;
}

TEST(TcpStore, TcpUrlsAreParsedOrRefusedNamingTheProblem) {
  RendezvousUrl u = parse_rendezvous_url("tcp://node-0.cluster:29500");
  EXPECT_EQ(u.kind, RendezvousUrl::kTcp);
  EXPECT_EQ(u.host, "node-0.cluster");
  EXPECT_EQ(u.port, 29500);
  u = parse_rendezvous_url("tcp://[::1]:1234/");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 1234);
  const std::pair<const char*, const char*> bad[] = {
      {"tcp://host", "no port"},
      {"tcp://:29500", "no host"},
      {"tcp://host:0", "port '0' is not a number in [1, 65535]"},
      {"tcp://host:65536", "port '65536'"},
      {"tcp://host:29500x", "port '29500x'"},
      {"tcp://::1:29500", "write an IPv6 address in brackets"},
      {"env://somewhere", "env:// takes nothing after it"},
  };
  for (const auto& b : bad) {
    Thrown t = thrown_by([&] { parse_rendezvous_url(b.first); });
    EXPECT_EQ(t.code, DDPH_INVALID_ARGUMENT) << b.first;
    EXPECT_TRUE(contains(t.message, std::string("init.rendezvous '") + b.first + "'")) << t.message;
    EXPECT_TRUE(contains(t.message, b.second)) << t.message;
  }
}

}  // namespace
}  // namespace rendezvous
}  // namespace ddph
