// The resident-state kit (core/memory/resident_floats.h) on the host, and at
// the edge to a GPU as far as a machine without one shows it: a move to
// CUDA memory is refused with DDPH_UNSUPPORTED (no CUDA in the build, or no
// usable device) and leaves the floats where they were.
#include "core/memory/resident_floats.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/error.h"

namespace {

using ddph::ResidentFloats;
using ddph::ResidentTable;
using ddph::Where;

const Where kHost{DLDevice{kDLCPU, 0}, nullptr};
const Where kGpu0{DLDevice{kDLCUDA, 0}, nullptr};

std::vector<float> values_of(const ResidentFloats& a) {
  return a.to_host();
}

TEST(ResidentFloats, StartsEmptyOnTheHost) {
  ResidentFloats a("kit test");
  EXPECT_EQ(a.size(), 0u);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(a.in(kHost));
  EXPECT_FALSE(a.in(kGpu0));
  EXPECT_TRUE(a.to_host().empty());
}

TEST(ResidentFloats, FitGivesZerosOnFirstUseAndKeepsValuesAfter) {
  ResidentFloats a("kit test");
  a.fit(kHost, 4);
  EXPECT_EQ(values_of(a), std::vector<float>(4, 0.0f));
  a.data()[2] = 5.0f;
  a.fit(kHost, 4);
  EXPECT_EQ(values_of(a), (std::vector<float>{0, 0, 5, 0}));
}

TEST(ResidentFloats, ALengthChangeResetsToZeros) {
  ResidentFloats a("kit test");
  a.set_host({1, 2, 3});
  a.fit(kHost, 2);
  EXPECT_EQ(values_of(a), std::vector<float>(2, 0.0f));
  a.set_host({1, 2, 3});
  a.zeros(kHost, 3);
  EXPECT_EQ(values_of(a), std::vector<float>(3, 0.0f));
}

TEST(ResidentFloats, SetHostAndToHostRoundTrip) {
  ResidentFloats a("kit test");
  const std::vector<float> v{1.5f, -2.0f, 3.25f};
  a.set_host(v);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a.to_host(), v);
  std::vector<float> out(3, 0.0f);
  a.download(out.data());
  EXPECT_EQ(out, v);
}

TEST(ResidentFloats, UploadCopiesTheHostValues) {
  ResidentFloats a("kit test");
  std::vector<float> v{4, 5, 6};
  a.upload(kHost, v.data(), v.size());
  v[0] = 0;  // the array has its own copy
  EXPECT_EQ(values_of(a), (std::vector<float>{4, 5, 6}));
}

TEST(ResidentFloats, MovesKeepValuesAndTheMoveFromIsEmpty) {
  ResidentFloats a("kit test");
  a.set_host({7, 8});
  a.move_to(kHost);  // already there: nothing changes
  EXPECT_EQ(values_of(a), (std::vector<float>{7, 8}));
  ResidentFloats b(std::move(a));
  EXPECT_EQ(values_of(b), (std::vector<float>{7, 8}));
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): defined as empty
  ResidentFloats c("kit test");
  c = std::move(b);
  EXPECT_EQ(values_of(c), (std::vector<float>{7, 8}));
  c.release();
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(c.in(kHost));
}

// Without a usable GPU the move is refused and the floats stay on the host;
// with one (a GPU machine) they go there and come back unchanged.
TEST(ResidentFloats, AMoveToAGpuKeepsTheValuesOrIsRefused) {
  ResidentFloats a("kit test");
  const std::vector<float> v{1, 2, 3};
  a.set_host(v);
  try {
    a.move_to(kGpu0);
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_UNSUPPORTED);
    EXPECT_EQ(std::string(e.what()).rfind("kit test: ", 0), 0u) << e.what();
#if !DDPH_TEST_WITH_CUDA
    // core's one refusal (on_device.h's refuse_cuda_memory).
    EXPECT_NE(std::string(e.what()).find("this build of ddphooks has no CUDA"), std::string::npos)
        << e.what();
#endif
    EXPECT_TRUE(a.in(kHost));
    EXPECT_EQ(a.to_host(), v);
    return;
  }
#if !DDPH_TEST_WITH_CUDA
  ADD_FAILURE() << "a build without CUDA took CUDA memory";
#endif
  EXPECT_TRUE(a.in(kGpu0));
  EXPECT_FALSE(a.in(kHost));
  EXPECT_EQ(a.to_host(), v);
  a.move_to(kHost);
  EXPECT_TRUE(a.in(kHost));
  EXPECT_EQ(a.to_host(), v);
}

TEST(ResidentFloats, ZerosOnAGpuAreRefusedWithoutOne) {
  ResidentFloats a("kit test");
  try {
    a.zeros(kGpu0, 3);
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_UNSUPPORTED);
    EXPECT_TRUE(a.empty());
    return;
  }
  EXPECT_EQ(a.to_host(), std::vector<float>(3, 0.0f));
}

TEST(ResidentTable, KeysStartWithEmptyArrays) {
  ResidentTable<uint64_t, 2> t("kit test");
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.find(3), nullptr);
  auto& arrays = t[3];
  EXPECT_TRUE(arrays[0].empty());
  EXPECT_TRUE(arrays[1].empty());
  EXPECT_EQ(t.find(3), &arrays);
  t.erase(3);
  EXPECT_TRUE(t.empty());
}

TEST(ResidentTable, ToHostAndReplaceRoundTripInKeyOrder) {
  ResidentTable<uint64_t, 2> t("kit test");
  t[9][0].set_host({1, 2});
  t[2][1].fit(kHost, 3);
  t[2][1].data()[0] = 4;
  const auto host = t.to_host();
  ASSERT_EQ(host.size(), 2u);
  EXPECT_EQ(host.begin()->first, 2u);
  EXPECT_EQ(host.at(2)[1], (std::vector<float>{4, 0, 0}));
  EXPECT_EQ(host.at(9)[0], (std::vector<float>{1, 2}));
  EXPECT_TRUE(host.at(9)[1].empty());

  ResidentTable<uint64_t, 2> u("kit test");
  u[5][0].set_host({3});  // dropped: not in the values given
  u.replace(host);
  EXPECT_EQ(u.find(5), nullptr);
  EXPECT_EQ(u.to_host(), host);
  u.move_all_to(kHost);
  EXPECT_EQ(u.to_host(), host);
  u.clear();
  EXPECT_TRUE(u.empty());
}

TEST(ResidentTable, AMoveOfEveryArrayToAGpuIsRefusedWithoutOne) {
  ResidentTable<uint64_t, 1> t("kit test");
  t[1][0].set_host({1, 2});
  try {
    t.move_all_to(kGpu0);
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_UNSUPPORTED);
    EXPECT_EQ(t[1][0].to_host(), (std::vector<float>{1, 2}));
    return;
  }
  t.move_all_to(kHost);
  EXPECT_EQ(t[1][0].to_host(), (std::vector<float>{1, 2}));
}

// ABI 1.10's flush of a residual into a bucket: float32 exactly, a 16-bit
// bucket in float32 with one rounding (1 + 2^-9 is not a bfloat16: it rounds
// to even, 1).
TEST(AddHostFloats, AddsIntoFloat32AndSixteenBitBuckets) {
  std::vector<float> f32 = {1.0f, -2.0f, 0.5f};
  const std::vector<float> add = {0.25f, 2.0f, 1.0f / 512};
  ddph::add_host_floats(kHost, ddph::DType::F32, f32.data(), add.data(), 3, "kit test");
  EXPECT_EQ(f32, (std::vector<float>{1.25f, 0.0f, 0.5f + 1.0f / 512}));
  // bfloat16 1.0, -2.0, 1.0 as bits.
  std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x3F80};
  ddph::add_host_floats(kHost, ddph::DType::BF16, bf16.data(), add.data(), 3, "kit test");
  EXPECT_EQ(bf16, (std::vector<uint16_t>{0x3FA0, 0x0000, 0x3F80}));
}

}  // namespace
