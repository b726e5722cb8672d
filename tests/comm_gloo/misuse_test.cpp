// The plugin's description and every argument check, each asserting the
// code and the field its message names. Single process (world 1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/comm_gloo/harness.h"
#include "tests/support/host.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

#define EXPECT_ERR(call, want_code, substring)                                      \
  do {                                                                              \
    Err e_ = take(call);                                                            \
    EXPECT_EQ(e_.code, want_code) << #call << " -> " << e_.text();                  \
    EXPECT_NE(e_.message.find(substring), std::string::npos)                        \
        << #call << ": message '" << e_.message << "' lacks '" << substring << "'"; \
  } while (0)

TEST(CommGlooPlugin, DescribesOneGlooFactoryAndItsOptions) {
  const ddph_plugin_t* p = plugin();
  ASSERT_NE(p, nullptr);
  EXPECT_GE(p->struct_size, DDPH_PLUGIN_SIZE_V1_0);
  EXPECT_EQ(p->abi_major, uint32_t(DDPH_ABI_MAJOR));
  EXPECT_STREQ(p->family, "comm_gloo");
  EXPECT_EQ(p->num_hooks, 0u);
  ASSERT_EQ(p->num_comms, 1u);
  const ddph_comm_factory_t* f = p->comms[0];
  EXPECT_GE(f->struct_size, DDPH_COMM_FACTORY_SIZE_V1_0);
  EXPECT_STREQ(f->backend, "gloo");
  ASSERT_NE(f->create, nullptr);
  bool hostname = false, iface = false;
  for (size_t i = 0; i < f->num_options; ++i) {
    const ddph_option_spec_t& o = f->options[i];
    EXPECT_EQ(o.type, DDPH_STRING) << o.name;
    ASSERT_NE(o.doc, nullptr);
    EXPECT_GT(std::strlen(o.doc), 10u) << o.name;
    if (std::strcmp(o.name, "hostname") == 0) {
      hostname = true;
      EXPECT_STREQ(o.default_value, "127.0.0.1");
    }
    if (std::strcmp(o.name, "iface") == 0) {
      iface = true;
      EXPECT_STREQ(o.default_value, "");
    }
  }
  EXPECT_TRUE(hostname && iface);
  // A host of another ABI major gets no plugin.
  ddph_host_t other = *ddph_host();
  other.abi_major = DDPH_ABI_MAJOR + 1;
  EXPECT_EQ(plugin_entry()(&other), nullptr);
  EXPECT_EQ(plugin_entry()(nullptr), nullptr);
}

class CreateMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ddph_test::make_temp_dir("ddph-misuse");
    url_ = file_url(dir_);
    init_.struct_size = sizeof init_;
    init_.host = ddph_host();
    init_.rank = 0;
    init_.world_size = 1;
    init_.rendezvous = url_.c_str();
    init_.prefix = "misuse";
    init_.timeout_ms = 2000;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  ddph_error_t* create() { return factory()->create(&init_, &out_); }
  std::string dir_, url_;
  ddph_comm_init_t init_{};
  ddph_comm_t* out_ = nullptr;
};

TEST_F(CreateMisuse, NullAndSizes) {
  EXPECT_ERR(factory()->create(nullptr, &out_), DDPH_INVALID_ARGUMENT, "init is NULL");
  EXPECT_ERR(factory()->create(&init_, nullptr), DDPH_INVALID_ARGUMENT, "out is NULL");
  init_.struct_size = DDPH_COMM_INIT_SIZE_V1_0 - 1;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.struct_size");
  EXPECT_EQ(out_, nullptr);
}

TEST_F(CreateMisuse, RankWorldTimeout) {
  init_.rank = -1;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.rank -1");
  init_.rank = 1;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.rank 1 is outside [0, 1)");
  init_.rank = 0;
  init_.world_size = 0;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.world_size 0");
  init_.world_size = 1;
  init_.timeout_ms = 0;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.timeout_ms");
}

TEST_F(CreateMisuse, RendezvousAndStore) {
  init_.rendezvous = nullptr;
  init_.world_size = 2;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT,
             "2 ranks need a rendezvous: set comm.rendezvous in the YAML");
  init_.world_size = 1;
  init_.rendezvous = "ftp://example";
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.rendezvous 'ftp://example'");
  init_.rendezvous = "file://relative/dir";
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "absolute path");
  init_.rendezvous = "redis://localhost:99999";
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "port '99999'");
  init_.rendezvous = "redis://:6379";
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "no host");
  ddph_store_t store{};
  store.struct_size = sizeof store;
  init_.rendezvous = nullptr;
  init_.store = &store;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.store->set");
  store.struct_size = 8;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.store->struct_size 8");
}

TEST_F(CreateMisuse, Options) {
  ddph_option_t opt{};
  opt.struct_size = sizeof opt;
  opt.name = "hostname";
  opt.type = DDPH_INT;
  opt.value.i = 3;
  init_.options = &opt;
  init_.num_options = 1;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "option 'hostname' has type int");
  init_.options = nullptr;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "init.options is NULL");
  opt.type = DDPH_STRING;
  opt.value.s = "192.0.2.1";
  init_.options = &opt;
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT, "option 'hostname' ('192.0.2.1')");
}

// The per-rank address from the environment wins over the options, and an
// error names the variable that set it.
TEST_F(CreateMisuse, AddressFromTheEnvironmentWinsAndIsNamed) {
  ddph_option_t opt{};
  opt.struct_size = sizeof opt;
  opt.name = "hostname";
  opt.type = DDPH_STRING;
  opt.value.s = "127.0.0.1";  // would listen fine: the variable must win
  init_.options = &opt;
  init_.num_options = 1;
  ASSERT_EQ(setenv("DDPH_GLOO_HOSTNAME", "192.0.2.1", 1), 0);  // TEST-NET: never local
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT,
             "rank 0: environment variable DDPH_GLOO_HOSTNAME ('192.0.2.1') cannot be used");
  ASSERT_EQ(setenv("DDPH_GLOO_IFACE", "ddph-no-such", 1), 0);  // the interface wins over both
  EXPECT_ERR(create(), DDPH_INVALID_ARGUMENT,
             "environment variable DDPH_GLOO_IFACE ('ddph-no-such') cannot be used");
  unsetenv("DDPH_GLOO_IFACE");
  unsetenv("DDPH_GLOO_HOSTNAME");
  EXPECT_EQ(out_, nullptr);
}

// Argument checks of the collectives, on a real world-1 communicator; none
// of them may break it.
class CollectiveMisuse : public CreateMisuse {
 protected:
  void SetUp() override {
    CreateMisuse::SetUp();
    Err e = take(create());
    ASSERT_TRUE(e.ok()) << e.text();
    c_ = out_;
    ASSERT_NE(c_, nullptr);
    ASSERT_GE(c_->struct_size, DDPH_COMM_SIZE_V1_0);
  }
  void TearDown() override {
    if (c_ != nullptr) {
      // Still healthy after all the misuse.
      Tensor t(kF32, 3);
      t.as<float>()[1] = 2.5f;
      Err e = take(c_->allreduce(c_->ctx, t.dl(), t.dl(), DDPH_AVG, nullptr));
      EXPECT_TRUE(e.ok()) << e.text();
      EXPECT_EQ(t.as<float>()[1], 2.5f);
      c_->destroy(c_->ctx);
    }
    CreateMisuse::TearDown();
  }
  ddph_comm_t* c_ = nullptr;
};

TEST_F(CollectiveMisuse, TensorChecks) {
  Tensor a(kF32, 4), b(kF32, 4), small(kF32, 3), d(kF64, 4), i8(kI8, 4);
  EXPECT_ERR(c_->allreduce(c_->ctx, nullptr, b.dl(), DDPH_SUM, nullptr), DDPH_INVALID_ARGUMENT,
             "allreduce: send is NULL");
  EXPECT_ERR(c_->allreduce(c_->ctx, a.dl(), nullptr, DDPH_SUM, nullptr), DDPH_INVALID_ARGUMENT,
             "allreduce: recv is NULL");
  EXPECT_ERR(c_->allreduce(c_->ctx, a.dl(), d.dl(), DDPH_SUM, nullptr), DDPH_INVALID_ARGUMENT,
             "recv dtype float64 differs from send dtype float32");
  EXPECT_ERR(c_->allreduce(c_->ctx, a.dl(), small.dl(), DDPH_SUM, nullptr), DDPH_INVALID_ARGUMENT,
             "recv has 3 elements, expected 4");
  EXPECT_ERR(c_->allreduce(c_->ctx, i8.dl(), i8.dl(), DDPH_SUM, nullptr), DDPH_UNSUPPORTED,
             "dtype int8");
  EXPECT_ERR(c_->allreduce(c_->ctx, a.dl(), b.dl(), ddph_reduce_op_t(7), nullptr),
             DDPH_INVALID_ARGUMENT, "op 7");

  DLTensor two_d = *a.dl();
  int64_t shape[2] = {2, 2};
  two_d.ndim = 2;
  two_d.shape = shape;
  EXPECT_ERR(c_->allreduce(c_->ctx, &two_d, &two_d, DDPH_SUM, nullptr), DDPH_INVALID_ARGUMENT,
             "send must be 1-D contiguous");
  DLTensor strided = *a.dl();
  int64_t n2 = 2, stride = 2;
  strided.shape = &n2;
  strided.strides = &stride;
  EXPECT_ERR(c_->broadcast(c_->ctx, &strided, 0, nullptr), DDPH_INVALID_ARGUMENT,
             "broadcast: buf must be 1-D contiguous");
  DLTensor gpu = *a.dl();
  gpu.device = DLDevice{kDLCUDA, 0};
  {
    Err e = take(c_->allreduce(c_->ctx, &gpu, &gpu, DDPH_SUM, nullptr));
    ddph_test::expect_false_cuda_label_refused(e.code, e.message);
  }
  // Partial overlap is neither in place nor separate buffers.
  int64_t three = 3;
  DLTensor shifted = view(a, 1, &three), first3 = view(a, 0, &three);
  EXPECT_ERR(c_->allreduce(c_->ctx, &first3, &shifted, DDPH_SUM, nullptr), DDPH_INVALID_ARGUMENT,
             "overlap");
}

TEST_F(CollectiveMisuse, SizesRootsPeersCtx) {
  Tensor a(kI32, 4), b(kI32, 4), wide(kI32, 8);
  EXPECT_ERR(c_->allgather(c_->ctx, a.dl(), wide.dl(), nullptr), DDPH_INVALID_ARGUMENT,
             "recv has 8 elements, expected 4 (size() * send numel)");
  EXPECT_ERR(c_->reduce_scatter(c_->ctx, wide.dl(), a.dl(), DDPH_SUM, nullptr),
             DDPH_INVALID_ARGUMENT, "send has 8 elements, expected 4 (size() * recv numel)");
  EXPECT_ERR(c_->broadcast(c_->ctx, a.dl(), 1, nullptr), DDPH_INVALID_ARGUMENT,
             "root 1 is outside [0, 1)");
  EXPECT_ERR(c_->send(c_->ctx, a.dl(), 0, nullptr), DDPH_INVALID_ARGUMENT, "itself");
  EXPECT_ERR(c_->recv(c_->ctx, a.dl(), 4, nullptr), DDPH_INVALID_ARGUMENT,
             "peer 4 is outside [0, 1)");
  EXPECT_ERR(c_->allreduce(nullptr, a.dl(), b.dl(), DDPH_SUM, nullptr), DDPH_INVALID_ARGUMENT,
             "ctx is NULL");
  EXPECT_ERR(c_->barrier(nullptr), DDPH_INVALID_ARGUMENT, "barrier: ctx is NULL");
  EXPECT_EQ(c_->rank(nullptr), -1);
  EXPECT_EQ(c_->bytes_sent(nullptr), 0u);
  c_->destroy(nullptr);  // a no-op
  ddph_comm_t* sub = nullptr;
  EXPECT_ERR(c_->split(c_->ctx, 0, 0, nullptr), DDPH_INVALID_ARGUMENT, "split: out is NULL");
  EXPECT_ERR(c_->split(nullptr, 0, 0, &sub), DDPH_INVALID_ARGUMENT, "split: ctx is NULL");
  // World 1: every collective is the identity, and works.
  a.as<int32_t>()[2] = 42;
  EXPECT_TRUE(take(c_->allgather(c_->ctx, a.dl(), b.dl(), nullptr)).ok());
  EXPECT_EQ(b.as<int32_t>()[2], 42);
  EXPECT_TRUE(take(c_->barrier(c_->ctx)).ok());
}

TEST_F(CollectiveMisuse, Alltoallv) {
  Tensor a(kI32, 4), b(kI32, 4), d(kF64, 4);
  const int64_t four[1] = {4}, three[1] = {3}, negative[1] = {-1};
  EXPECT_ERR(c_->alltoallv(c_->ctx, a.dl(), nullptr, b.dl(), four, nullptr), DDPH_INVALID_ARGUMENT,
             "alltoallv: send_counts or recv_counts is NULL");
  EXPECT_ERR(c_->alltoallv(c_->ctx, a.dl(), negative, b.dl(), four, nullptr), DDPH_INVALID_ARGUMENT,
             "the count for rank 0 is negative");
  EXPECT_ERR(c_->alltoallv(c_->ctx, a.dl(), three, b.dl(), three, nullptr), DDPH_INVALID_ARGUMENT,
             "send has 4 elements, expected 3 (the sum of send_counts)");
  EXPECT_ERR(c_->alltoallv(c_->ctx, a.dl(), four, d.dl(), four, nullptr), DDPH_INVALID_ARGUMENT,
             "recv dtype float64 differs from send dtype int32");
  EXPECT_ERR(c_->alltoallv(c_->ctx, a.dl(), four, a.dl(), four, nullptr), DDPH_INVALID_ARGUMENT,
             "alltoallv: send and recv overlap");
  EXPECT_ERR(c_->alltoallv(nullptr, a.dl(), four, b.dl(), four, nullptr), DDPH_INVALID_ARGUMENT,
             "alltoallv: ctx is NULL");
  // Counts that add up on each side but give this rank's own block two
  // lengths (check_alltoallv_args, shared by every backend).
  Tensor five(kI32, 5);
  const int64_t five_count[1] = {5};
  EXPECT_ERR(c_->alltoallv(c_->ctx, a.dl(), four, five.dl(), five_count, nullptr),
             DDPH_INVALID_ARGUMENT, "alltoallv: rank 0 sends itself 4 elements but expects 5");
  // World 1: the own block is copied.
  for (int i = 0; i < 4; ++i) a.as<int32_t>()[i] = 7 * i + 1;
  EXPECT_TRUE(take(c_->alltoallv(c_->ctx, a.dl(), four, b.dl(), four, nullptr)).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.as<int32_t>()[i], 7 * i + 1);
}

}  // namespace
}  // namespace comm_gloo_test
