// The host's device allocator (ABI 1.3) inside a plugin: the comm and hook
// table trampolines make the right one current for exactly the length of
// each call (core/base/device_allocator.h), which is what the device scratch
// pool takes its memory from.
#include "core/base/device_allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "core/comm/backend.h"
#include "core/hook/hook.h"

namespace {

using ddph::current_device_allocator;

ddph_device_allocator_t allocator_table(void* ctx) {
  ddph_device_allocator_t t{};
  t.struct_size = sizeof t;
  t.ctx = ctx;
  t.alloc = [](void*, size_t, DLDevice, void*) -> void* { return nullptr; };
  t.free = [](void*, void*, DLDevice, void*) {};
  return t;
}

// Records the allocator current while its collectives run.
struct RecordingBackend : ddph::CommBackend {
  explicit RecordingBackend(const ddph_device_allocator_t** seen) : seen_(seen) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce(const DLTensor*, DLTensor*, ddph_reduce_op_t, void*) override {
    *seen_ = current_device_allocator();
  }
  void allgather(const DLTensor*, DLTensor*, void*) override {}
  void reduce_scatter(const DLTensor*, DLTensor*, ddph_reduce_op_t, void*) override {}
  void broadcast(DLTensor*, int, void*) override {}
  void barrier() override { *seen_ = current_device_allocator(); }
  void send(const DLTensor*, int, void*) override {}
  void recv(DLTensor*, int, void*) override {}
  void alltoallv(const DLTensor*, const int64_t*, DLTensor*, const int64_t*, void*) override {}
  std::unique_ptr<CommBackend> split(int, int) override {
    return std::make_unique<RecordingBackend>(seen_);
  }
  const ddph_device_allocator_t** seen_;
};

TEST(DeviceAllocator, ScopesNestAndRestoreWhatWasCurrent) {
  int a_ctx = 0, b_ctx = 0;
  const ddph_device_allocator_t a = allocator_table(&a_ctx), b = allocator_table(&b_ctx);
  EXPECT_EQ(current_device_allocator(), nullptr);
  {
    ddph::DeviceAllocatorScope outer(&a);
    EXPECT_EQ(current_device_allocator(), &a);
    {
      ddph::DeviceAllocatorScope inner(&b);
      EXPECT_EQ(current_device_allocator(), &b);
    }
    EXPECT_EQ(current_device_allocator(), &a);
  }
  EXPECT_EQ(current_device_allocator(), nullptr);
}

// Two sessions may run their hooks at once on two worker threads, each with
// its own allocator: a scope on one thread is not seen on another.
TEST(DeviceAllocator, EachThreadHasItsOwnCurrent) {
  int a_ctx = 0, b_ctx = 0;
  const ddph_device_allocator_t a = allocator_table(&a_ctx), b = allocator_table(&b_ctx);
  ddph::DeviceAllocatorScope mine(&a);
  const ddph_device_allocator_t* seen_before = &a;
  const ddph_device_allocator_t* seen_inside = nullptr;
  std::thread other([&] {
    seen_before = current_device_allocator();
    ddph::DeviceAllocatorScope theirs(&b);
    seen_inside = current_device_allocator();
  });
  other.join();
  EXPECT_EQ(seen_before, nullptr);
  EXPECT_EQ(seen_inside, &b);
  EXPECT_EQ(current_device_allocator(), &a);
}

TEST(DeviceAllocator, TheCommTableMakesItsOwnCurrentForEachCallAndSplitsInheritIt) {
  int ctx = 0;
  const ddph_device_allocator_t mine = allocator_table(&ctx);
  const ddph_device_allocator_t* seen = nullptr;
  ddph_comm_t* comm = ddph::make_comm_table(std::make_unique<RecordingBackend>(&seen), &mine);
  float x = 1;
  int64_t n = 1;
  DLTensor t{&x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, nullptr, 0};
  EXPECT_EQ(comm->allreduce(comm->ctx, &t, &t, DDPH_SUM, nullptr), nullptr);
  EXPECT_EQ(seen, &mine);
  EXPECT_EQ(current_device_allocator(), nullptr) << "the call's scope ended with it";
  ddph_comm_t* sub = nullptr;
  ASSERT_EQ(comm->split(comm->ctx, 0, 0, &sub), nullptr);
  ASSERT_NE(sub, nullptr);
  seen = nullptr;
  EXPECT_EQ(sub->barrier(sub->ctx), nullptr);
  EXPECT_EQ(seen, &mine);
  sub->destroy(sub->ctx);
  // A table made without one runs its calls with none, whatever the caller's.
  ddph_comm_t* plain = ddph::make_comm_table(std::make_unique<RecordingBackend>(&seen));
  {
    ddph::DeviceAllocatorScope callers(&mine);
    EXPECT_EQ(plain->barrier(plain->ctx), nullptr);
  }
  EXPECT_EQ(seen, nullptr);
  plain->destroy(plain->ctx);
  comm->destroy(comm->ctx);
}

const ddph_device_allocator_t* g_at_create = nullptr;
const ddph_device_allocator_t* g_at_run = nullptr;

struct RecordingHook : ddph::Hook {
  static constexpr uint32_t kFlags = 0;
  explicit RecordingHook(const ddph_hook_init_t&) { g_at_create = current_device_allocator(); }
  void run(const ddph_bucket_t&, ddph::DType, const ddph::Completion& done) override {
    g_at_run = current_device_allocator();
    done.ok();
  }
};

// What a hook sees at create and at run for an init of this struct_size.
void create_and_run(const ddph_device_allocator_t* given, size_t init_size) {
  const ddph_device_allocator_t* seen = nullptr;
  ddph_comm_t* comm = ddph::make_comm_table(std::make_unique<RecordingBackend>(&seen));
  static const ddph_hook_t table = ddph::hook_table<RecordingHook>("recording", "test", nullptr, 0);
  ddph_hook_init_t init{};
  init.struct_size = init_size;
  init.comm = comm;
  init.device_allocator = given;
  g_at_create = g_at_run = reinterpret_cast<const ddph_device_allocator_t*>(&init);  // neither
  void* state = nullptr;
  ASSERT_EQ(table.create(&init, &state), nullptr);
  float x[4] = {1, 2, 3, 4};
  int64_t n = 4;
  ddph_bucket_t b{};
  b.struct_size = sizeof b;
  b.buffer = DLTensor{x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, nullptr, 0};
  ASSERT_EQ(table.run_bucket(
                state, &b, [](void*, ddph_error_t*) {}, nullptr),
            nullptr);
  table.destroy(state);
  comm->destroy(comm->ctx);
  EXPECT_EQ(current_device_allocator(), nullptr);
}

TEST(DeviceAllocator, TheHookTableMakesTheInitsAllocatorCurrentInCreateAndRun) {
  int ctx = 0;
  const ddph_device_allocator_t mine = allocator_table(&ctx);
  create_and_run(&mine, sizeof(ddph_hook_init_t));
  EXPECT_EQ(g_at_create, &mine);
  EXPECT_EQ(g_at_run, &mine);
  // A 1.2 init ends before device_allocator: it is not read.
  create_and_run(&mine, DDPH_HOOK_INIT_SIZE_V1_2);
  EXPECT_EQ(g_at_create, nullptr);
  EXPECT_EQ(g_at_run, nullptr);
}

}  // namespace
