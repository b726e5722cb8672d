// The training model's math: backward against finite differences, the
// layer-by-layer order that lets buckets go out during backward, and the
// determinism that keeps ranks bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tool/train/model.h"

namespace ddph::tool {
namespace {

struct Batch {
  std::vector<float> x;
  std::vector<int> y;
};

Batch random_batch(int n, int dim, int classes, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  for (int i = 0; i < n * dim; ++i) b.x.push_back(static_cast<float>(2 * rng.uniform() - 1));
  for (int i = 0; i < n; ++i) b.y.push_back(static_cast<int>(rng.below(classes)));
  return b;
}

double loss_at(Mlp& m, const Batch& b, int n) {
  m.forward(b.x.data(), n);
  return m.loss(b.y.data(), nullptr);
}

TEST(TrainModel, BackwardMatchesFiniteDifferences) {
  const int n = 6;
  Mlp m({3, 7, 5, 4}, 11);
  Batch b = random_batch(n, 3, 4, 5);
  m.forward(b.x.data(), n);
  m.backward(b.y.data());
  std::vector<std::vector<float>> analytic;
  for (const Param& p : m.params()) analytic.push_back(p.grad);

  const double eps = 1e-3;
  int checked = 0;
  for (size_t k = 0; k < m.params().size(); ++k) {
    for (size_t i = 0; i < m.params()[k].value.size(); ++i) {
      float& v = m.params()[k].value[i];
      const float saved = v;
      v = static_cast<float>(saved + eps);
      double up = loss_at(m, b, n);
      v = static_cast<float>(saved - eps);
      double down = loss_at(m, b, n);
      v = saved;
      double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(analytic[k][i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << m.params()[k].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * 7 + 7 + 7 * 5 + 5 + 5 * 4 + 4);
}

TEST(TrainModel, ParamsComeInForwardOrderWithPyTorchShapes) {
  Mlp m({2, 64, 64, 3}, 1);
  const auto& p = m.params();
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p[0].name, "W1");
  EXPECT_EQ(p[0].shape, (std::vector<int64_t>{64, 2}));
  EXPECT_EQ(p[1].shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(p[4].shape, (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(p[5].layer, 2);
  // nn.Linear's init bound is 1/sqrt(fan_in).
  for (float v : p[0].value) EXPECT_LE(std::fabs(v), 1 / std::sqrt(2.0f));
  for (float v : p[2].value) EXPECT_LE(std::fabs(v), 1 / 8.0f);
}

TEST(TrainModel, LayerDoneRunsLastLayerFirstWithFinalGrads) {
  Mlp m({2, 8, 8, 3}, 2);
  Batch b = random_batch(5, 2, 3, 9);
  m.forward(b.x.data(), 5);
  std::vector<int> order;
  std::vector<std::vector<float>> seen(m.params().size());
  m.backward(b.y.data(), [&](int layer) {
    order.push_back(layer);
    for (size_t k = 0; k < m.params().size(); ++k)
      if (m.params()[k].layer == layer) seen[k] = m.params()[k].grad;
  });
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
  for (size_t k = 0; k < m.params().size(); ++k) EXPECT_EQ(seen[k], m.params()[k].grad);
}

TEST(TrainModel, SameSeedSameModelAndHash) {
  Mlp a({2, 16, 3}, 42), b({2, 16, 3}, 42), c({2, 16, 3}, 43);
  EXPECT_EQ(hash_params(a.params()), hash_params(b.params()));
  EXPECT_NE(hash_params(a.params()), hash_params(c.params()));
  b.params()[1].value[0] = std::nextafter(b.params()[1].value[0], 1.0f);  // one ulp
  EXPECT_NE(hash_params(a.params()), hash_params(b.params()));
}

TEST(TrainModel, SpiralsAreDeterministicAndBalanced) {
  Dataset a = make_spirals(3, 50, 0.1, 7), b = make_spirals(3, 50, 0.1, 7);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  ASSERT_EQ(a.size(), 150);
  std::vector<int> counts(3, 0);
  for (int y : a.y) ++counts[y];
  EXPECT_EQ(counts, (std::vector<int>{50, 50, 50}));
}

TEST(TrainModel, SgdWithMomentumMatchesPyTorchFormula) {
  std::vector<Param> ps(1);
  ps[0].value = {1.0f};
  ps[0].grad = {0.5f};
  Sgd sgd(0.1, 0.9);
  sgd.step(ps);  // v = 0.5, p = 1 - 0.05
  EXPECT_FLOAT_EQ(ps[0].value[0], 0.95f);
  sgd.step(ps);  // v = 0.45 + 0.5, p = 0.95 - 0.095
  EXPECT_FLOAT_EQ(ps[0].value[0], 0.855f);
}

TEST(TrainModel, LearnsSpiralsOnOneRank) {
  Dataset train = make_spirals(3, 300, 0.15, 1), test = make_spirals(3, 100, 0.15, 2);
  Mlp m({2, 64, 64, 3}, 3);
  Sgd sgd(0.1, 0.9);
  Rng rng(4);
  const int n = 64;
  std::vector<float> x(2 * n);
  std::vector<int> y(n);
  double before = m.accuracy(test);
  for (int step = 0; step < 1500; ++step) {
    for (int k = 0; k < n; ++k) {
      int i = static_cast<int>(rng.below(train.size()));
      x[2 * k] = train.x[2 * i];
      x[2 * k + 1] = train.x[2 * i + 1];
      y[k] = train.y[i];
    }
    m.forward(x.data(), n);
    m.backward(y.data());
    sgd.step(m.params());
  }
  double after = m.accuracy(test);
  EXPECT_LT(before, 0.5);
  EXPECT_GT(after, 0.75) << "before " << before;
}

}  // namespace
}  // namespace ddph::tool
