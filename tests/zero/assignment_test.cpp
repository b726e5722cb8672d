// The zero family's assignment of parameters to ranks against PyTorch 1.13's
// own (ZeroRedundancyOptimizer._bucket_assignments_per_rank, run at test
// time on the same bucket layouts): whole buckets and shard_buckets, worlds
// of 1 to 5, random layouts and the edges of the threshold.
#include "plugins/zero/assignment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/error.h"
#include "tests/support/torch_ref.h"

namespace {

using ddph::zero::assign_buckets;
using ddph::zero::Share;
using Layout = std::vector<std::vector<size_t>>;

// PyTorch's method on a stand-in object that holds only what it reads.
// Input `cases`: per case world, shard, bucket count, then per bucket its
// parameter count and their numels. Output `shares`: per case the share
// count, then (bucket, first, count, rank) per share; a case PyTorch cannot
// place (its "All indices are disallowed" assertion) has count -1.
const char* kScript = R"PY(
import sys, types, numpy as np, torch
from torch.distributed.optim import ZeroRedundancyOptimizer as Z
from torch.distributed.optim.zero_redundancy_optimizer import _OverlapInfo, _OverlapStatus
d = sys.argv[1]
v = list(np.fromfile(d + '/cases', dtype=np.int64))
out = []
pos = 0
while pos < len(v):
    world, shard, nb = int(v[pos]), bool(v[pos + 1]), int(v[pos + 2]); pos += 3
    numels = []
    for _ in range(nb):
        k = int(v[pos]); numels.append([int(x) for x in v[pos + 1:pos + 1 + k]]); pos += 1 + k
    m = types.SimpleNamespace(_overlap_with_ddp=True, _bucket_assignments_per_rank_cache=[],
                              world_size=world, global_rank=0)
    oi = _OverlapInfo(world)
    oi.status = _OverlapStatus.INITIALIZED
    oi.params_per_bucket = [[torch.empty(n) for n in b] for b in numels]
    oi.shard_buckets = shard
    oi.total_size = sum(sum(b) for b in numels)
    m._overlap_info = oi
    for name in ('_get_min_index', '_assign_bucket_subset_to_rank', '_get_assigned_rank'):
        setattr(m, name, types.MethodType(getattr(Z, name), m))
    try:
        per_rank = Z._bucket_assignments_per_rank.fget(m)
    except AssertionError:
        out.append(-1)
        continue
    shares = [(b, a.offset, len(a.parameters), r)
              for r, assigned in enumerate(per_rank) for b, a in assigned.items()]
    out.append(len(shares))
    for s in sorted(shares): out.extend(s)
np.array(out, dtype=np.int64).tofile(d + '/shares')
)PY";

struct Case {
  Layout layout;
  int world;
  bool shard;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<Layout> fixed = {
      {{3, 4}, {10}, {1, 1, 1, 1, 20}},
      {{3, 4}, {10}, {1, 1, 1, 1, 20}, {5, 5, 5, 5}},
      {{7}},
      {{6, 6}, {6, 6}},             // equal buckets: ties keep index order
      {{4, 4, 4}, {4, 4, 4}},       // pieces exactly at the threshold (24 / 2 or / 3)
      {{1, 100, 1}, {1, 1}, {50}},  // a piece of one huge parameter
  };
  for (const Layout& l : fixed)
    for (int world = 1; world <= 4; ++world)
      for (bool shard : {false, true}) out.push_back({l, world, shard});
  std::mt19937 rng(25);
  for (int k = 0; k < 120; ++k) {
    Layout l(1 + rng() % 8);
    for (auto& bucket : l) {
      bucket.resize(1 + rng() % 6);
      // Mostly small parameters, some large, so both cut rules are exercised.
      for (size_t& n : bucket) n = rng() % 4 == 0 ? 1 + rng() % 5000 : 1 + rng() % 64;
    }
    out.push_back({l, 1 + int(rng() % 5), rng() % 3 != 0});
  }
  return out;
}

TEST(ZeroAssignment, MatchesPyTorchsZeroRedundancyOptimizer) {
  if (!ddph_test::torch_available()) GTEST_SKIP() << "/usr/bin/python3 with torch not found";
  const std::vector<Case> all = cases();
  std::vector<int64_t> in;
  for (const Case& c : all) {
    in.insert(in.end(), {c.world, c.shard ? 1 : 0, int64_t(c.layout.size())});
    for (const auto& bucket : c.layout) {
      in.push_back(int64_t(bucket.size()));
      for (size_t n : bucket) in.push_back(int64_t(n));
    }
  }
  const std::vector<int64_t> ref = ddph_test::from_blob<int64_t>(
      ddph_test::run_torch(kScript, {{"cases", ddph_test::to_blob(in)}}, {"shares"}).at("shares"));
  size_t pos = 0, refused = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const Case& c = all[k];
    SCOPED_TRACE("case " + std::to_string(k) + ", world " + std::to_string(c.world) +
                 (c.shard ? ", shard_buckets" : ""));
    ASSERT_LT(pos, ref.size());
    const int64_t count = ref[pos++];
    if (count < 0) {
      ++refused;
      EXPECT_THROW(assign_buckets(c.layout, c.world, c.shard), ddph::Error);
      continue;
    }
    std::vector<Share> got = assign_buckets(c.layout, c.world, c.shard);
    std::sort(got.begin(), got.end(), [](const Share& a, const Share& b) {
      return std::tie(a.bucket, a.first, a.count, a.rank) <
             std::tie(b.bucket, b.first, b.count, b.rank);
    });
    ASSERT_EQ(int64_t(got.size()), count);
    for (const Share& s : got) {
      EXPECT_EQ(int64_t(s.bucket), ref[pos]);
      EXPECT_EQ(int64_t(s.first), ref[pos + 1]);
      EXPECT_EQ(int64_t(s.count), ref[pos + 2]);
      EXPECT_EQ(int64_t(s.rank), ref[pos + 3]);
      pos += 4;
    }
  }
  EXPECT_EQ(pos, ref.size());
  // Most layouts must be placeable, or the comparison says little.
  EXPECT_LT(refused, all.size() / 10);
}

TEST(ZeroAssignment, EveryParameterHasExactlyOneOwner) {
  for (const Case& c : cases()) {
    std::vector<Share> shares;
    try {
      shares = assign_buckets(c.layout, c.world, c.shard);
    } catch (const ddph::Error&) {
      continue;  // the layouts PyTorch cannot place either (previous test)
    }
    for (size_t b = 0; b < c.layout.size(); ++b) {
      std::vector<int> owners(c.layout[b].size(), 0);
      std::vector<bool> rank_used(size_t(c.world), false);
      for (const Share& s : shares) {
        if (s.bucket != b) continue;
        ASSERT_GE(s.rank, 0);
        ASSERT_LT(s.rank, c.world);
        EXPECT_FALSE(rank_used[size_t(s.rank)]) << "two pieces of one bucket on one rank";
        rank_used[size_t(s.rank)] = true;
        for (size_t i = s.first; i < s.first + s.count; ++i) ++owners.at(i);
      }
      for (int n : owners) EXPECT_EQ(n, 1) << "bucket " << b;
    }
  }
}

TEST(ZeroAssignment, BadLayoutsAreErrorsNamingTheProblem) {
  try {
    assign_buckets({{4}, {}}, 2, false);
    FAIL() << "an empty bucket was accepted";
  } catch (const ddph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bucket 1 has no parameters"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(assign_buckets({{4}}, 0, false), ddph::Error);
  // Small and large parameters in turn: each large one closes a piece, so
  // the bucket needs more pieces than 2 ranks.
  try {
    assign_buckets({{1, 10, 1, 10, 1, 10}}, 2, true);
    FAIL() << "an unplaceable bucket was accepted";
  } catch (const ddph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard_buckets: false"), std::string::npos) << e.what();
  }
}

}  // namespace
