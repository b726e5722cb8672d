#include "tool/train/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ddph::tool {

Mlp::Mlp(const std::vector<int>& sizes, uint64_t seed) : sizes_(sizes) {
  Rng rng(seed);
  for (int l = 0; l + 1 < static_cast<int>(sizes.size()); ++l) {
    int in = sizes[l], out = sizes[l + 1];
    // PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both.
    double bound = 1.0 / std::sqrt(static_cast<double>(in));
    Param w{"W" + std::to_string(l + 1), {out, in}, {}, {}, l};
    Param b{"b" + std::to_string(l + 1), {out}, {}, {}, l};
    w.value.resize(static_cast<size_t>(out) * in);
    b.value.resize(out);
    for (float& v : w.value) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
    for (float& v : b.value) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
    w.grad.assign(w.value.size(), 0.f);
    b.grad.assign(b.value.size(), 0.f);
    params_.push_back(std::move(w));
    params_.push_back(std::move(b));
  }
}

const std::vector<float>& Mlp::forward(const float* x, int batch) {
  batch_ = batch;
  acts_.resize(sizes_.size());
  acts_[0].assign(x, x + static_cast<size_t>(batch) * sizes_[0]);
  for (int l = 0; l < num_layers(); ++l) {
    int in = sizes_[l], out = sizes_[l + 1];
    const float* w = params_[2 * l].value.data();
    const float* b = params_[2 * l + 1].value.data();
    const std::vector<float>& a = acts_[l];
    std::vector<float>& z = acts_[l + 1];
    z.resize(static_cast<size_t>(batch) * out);
    bool relu = l + 1 < num_layers();
    for (int n = 0; n < batch; ++n) {
      const float* an = &a[static_cast<size_t>(n) * in];
      for (int o = 0; o < out; ++o) {
        const float* wo = w + static_cast<size_t>(o) * in;
        float s = b[o];
        for (int i = 0; i < in; ++i) s += wo[i] * an[i];
        z[static_cast<size_t>(n) * out + o] = relu ? std::max(s, 0.f) : s;
      }
    }
  }
  return acts_.back();
}

namespace {
// Softmax of one row of logits, max-shifted so exp never overflows.
void softmax_row(const float* z, int c, double* p) {
  double m = z[0];
  for (int k = 1; k < c; ++k) m = std::max(m, static_cast<double>(z[k]));
  double sum = 0;
  for (int k = 0; k < c; ++k) sum += p[k] = std::exp(z[k] - m);
  for (int k = 0; k < c; ++k) p[k] /= sum;
}
}  // namespace

double Mlp::loss(const int* labels, int* correct) const {
  int c = sizes_.back();
  const std::vector<float>& z = acts_.back();
  std::vector<double> p(c);
  double total = 0;
  int right = 0;
  for (int n = 0; n < batch_; ++n) {
    const float* zn = &z[static_cast<size_t>(n) * c];
    softmax_row(zn, c, p.data());
    total -= std::log(std::max(p[labels[n]], 1e-300));
    if (std::max_element(zn, zn + c) - zn == labels[n]) ++right;
  }
  if (correct != nullptr) *correct = right;
  return batch_ > 0 ? total / batch_ : 0.0;
}

void Mlp::backward(const int* labels, const std::function<void(int)>& layer_done) {
  int c = sizes_.back();
  // dL/dz of the last layer: (softmax - onehot) / batch.
  std::vector<float> delta(acts_.back().size());
  std::vector<double> p(c);
  for (int n = 0; n < batch_; ++n) {
    softmax_row(&acts_.back()[static_cast<size_t>(n) * c], c, p.data());
    for (int k = 0; k < c; ++k)
      delta[static_cast<size_t>(n) * c + k] =
          static_cast<float>((p[k] - (k == labels[n] ? 1.0 : 0.0)) / batch_);
  }
  std::vector<float> prev;
  for (int l = num_layers() - 1; l >= 0; --l) {
    int in = sizes_[l], out = sizes_[l + 1];
    Param& w = params_[2 * l];
    Param& b = params_[2 * l + 1];
    const std::vector<float>& a = acts_[l];
    std::fill(w.grad.begin(), w.grad.end(), 0.f);
    std::fill(b.grad.begin(), b.grad.end(), 0.f);
    for (int n = 0; n < batch_; ++n) {
      const float* an = &a[static_cast<size_t>(n) * in];
      const float* dn = &delta[static_cast<size_t>(n) * out];
      for (int o = 0; o < out; ++o) {
        float* go = &w.grad[static_cast<size_t>(o) * in];
        for (int i = 0; i < in; ++i) go[i] += dn[o] * an[i];
        b.grad[o] += dn[o];
      }
    }
    if (l > 0) {
      // Through W, then through the ReLU that produced a (a > 0 where it passed).
      prev.assign(static_cast<size_t>(batch_) * in, 0.f);
      for (int n = 0; n < batch_; ++n) {
        const float* dn = &delta[static_cast<size_t>(n) * out];
        float* pn = &prev[static_cast<size_t>(n) * in];
        for (int o = 0; o < out; ++o) {
          const float* wo = &w.value[static_cast<size_t>(o) * in];
          for (int i = 0; i < in; ++i) pn[i] += dn[o] * wo[i];
        }
        const float* an = &a[static_cast<size_t>(n) * in];
        for (int i = 0; i < in; ++i)
          if (an[i] <= 0.f) pn[i] = 0.f;
      }
      delta.swap(prev);
    }
    if (layer_done) layer_done(l);
  }
}

namespace {
struct Evaluation {
  double accuracy = 0, loss = 0;
};
}  // namespace

static Evaluation evaluate(Mlp& m, const Dataset& d) {
  const int chunk = 256;
  int right = 0;
  double loss_sum = 0;
  for (int start = 0; start < d.size(); start += chunk) {
    int n = std::min(chunk, d.size() - start);
    m.forward(&d.x[static_cast<size_t>(start) * d.dim], n);
    int correct = 0;
    loss_sum += m.loss(&d.y[start], &correct) * n;
    right += correct;
  }
  Evaluation e;
  if (d.size() > 0) {
    e.accuracy = static_cast<double>(right) / d.size();
    e.loss = loss_sum / d.size();
  }
  return e;
}

double Mlp::accuracy(const Dataset& d) {
  return evaluate(*this, d).accuracy;
}

double Mlp::mean_loss(const Dataset& d) {
  return evaluate(*this, d).loss;
}

void Sgd::step(std::vector<Param>& params) {
  if (velocity_.size() != params.size()) {
    velocity_.clear();
    for (const Param& p : params) velocity_.emplace_back(p.value.size(), 0.f);
  }
  const float lr = static_cast<float>(lr_), mu = static_cast<float>(momentum_);
  for (size_t k = 0; k < params.size(); ++k) {
    std::vector<float>& v = velocity_[k];
    Param& p = params[k];
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = mu * v[i] + p.grad[i];
      p.value[i] -= lr * v[i];
    }
  }
}

uint64_t hash_params(const std::vector<Param>& params) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const Param& p : params) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p.value.data());
    for (size_t i = 0; i < p.value.size() * sizeof(float); ++i) {
      h ^= bytes[i];
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

}  // namespace ddph::tool
