// ddph's gloo communicator runs its own ring, tree and barrier (so their
// buffers outlive a dead peer, plugins/comm_gloo/posted_buffers.h); gloo's
// own algorithms, run in the same processes on the same inputs, are the
// reference they must match bit for bit.
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/comm_gloo/harness.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

std::shared_ptr<::gloo::Context> gloo_context(int rank, int world, const std::string& dir) {
  const std::string path = dir + "/gloo_reference";
  mkdir(path.c_str(), 0700);  // every rank tries; one wins
  ::gloo::rendezvous::FileStore store(path);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, world);
  auto device = ::gloo::transport::tcp::CreateDevice("127.0.0.1");
  context->connectFullMesh(store, device);
  return context;
}

// Values with long mantissas, different on every rank, so the order of the
// additions shows in the low bits.
std::vector<float> inputs(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = 1.0f + float((i * 37 + size_t(rank) * 101) % 1009) / 7.0f - float(rank % 2) * 3.1f;
  return v;
}

void gloo_allreduce(const std::shared_ptr<::gloo::Context>& context, std::vector<float>& data,
                    void (*fn)(void*, const void*, const void*, size_t), uint32_t tag) {
  ::gloo::AllreduceOptions opts(context);
  opts.setOutput<float>(data.data(), data.size());
  opts.setReduceFunction(fn);
  opts.setTag(tag);
  ::gloo::allreduce(opts);
}

int reference_body(int rank, int world, const std::string& dir) {
  auto context = gloo_context(rank, world, dir);
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d", rank);
  uint32_t tag = 1;
  // 10 MB: more than 2W of gloo's 1 MiB segments at every world size here,
  // so chunks hold 3 to 5 segments whose size gloo derives from their count
  // (it differs from 1 MiB); 2.8 MB: 2 segments per chunk and a ragged end;
  // and a tiny buffer where most ring segments are empty.
  for (size_t n : {size_t(2500007), size_t(700001), size_t(3)}) {
    struct Case {
      const char* name;
      ddph_reduce_op_t op;
      void (*fn)(void*, const void*, const void*, size_t);
      bool divide_first;  // PyTorch's allreduce_hook on Gloo: divide, then sum
    };
    const Case cases[] = {
        {"SUM", DDPH_SUM, &::gloo::sum<float>, false},
        {"MAX", DDPH_MAX, &::gloo::max<float>, false},
        {"MIN", DDPH_MIN, &::gloo::min<float>, false},
        {"AVG", DDPH_AVG, &::gloo::sum<float>, true},
    };
    for (const Case& k : cases) {
      std::vector<float> ours = inputs(rank, n), theirs = inputs(rank, n);
      if (k.divide_first)
        for (float& x : theirs) x /= float(world);
      Tensor t(kF32, int64_t(n));
      std::memcpy(t.as<float>(), ours.data(), n * sizeof(float));
      CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), k.op, nullptr));
      gloo_allreduce(context, theirs, k.fn, tag++);
      DDPH_CHILD_CHECK(std::memcmp(t.as<float>(), theirs.data(), n * sizeof(float)) == 0,
                       "%s of %zu floats differs from gloo::allreduce", k.name, n);
    }
  }
  // broadcast from every root.
  for (int root = 0; root < world; ++root) {
    const size_t n = 300007;
    std::vector<float> theirs = inputs(rank, n);
    Tensor t(kF32, int64_t(n));
    std::memcpy(t.as<float>(), theirs.data(), n * sizeof(float));
    CHILD_OK(comm->broadcast(comm->ctx, t.dl(), root, nullptr));
    ::gloo::BroadcastOptions opts(context);
    opts.setOutput<float>(theirs.data(), n);
    opts.setRoot(root);
    opts.setTag(tag++);
    ::gloo::broadcast(opts);
    DDPH_CHILD_CHECK(std::memcmp(t.as<float>(), theirs.data(), n * sizeof(float)) == 0,
                     "broadcast from rank %d differs from gloo::broadcast", root);
    const std::vector<float> roots = inputs(root, n);
    DDPH_CHILD_CHECK(std::memcmp(t.as<float>(), roots.data(), n * sizeof(float)) == 0,
                     "broadcast from rank %d did not deliver the root's data", root);
  }
  comm->destroy(comm->ctx);
  return 0;
}

class CommGlooAgainstGloo : public ::testing::TestWithParam<int> {};

TEST_P(CommGlooAgainstGloo, AllreduceAndBroadcastAreBitIdenticalToGloosOwn) {
  auto res = ddph_test::run_ranks(GetParam(), reference_body, 60);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

INSTANTIATE_TEST_SUITE_P(World, CommGlooAgainstGloo, ::testing::Values(2, 3, 4), world_name);

}  // namespace
}  // namespace comm_gloo_test
