// The model of `ddph train`: a small ReLU MLP with softmax cross-entropy, in
// plain loops, and momentum SGD; its data set is in train/data.h.
//
// Everything here is deterministic given the seed and uses no threads, so
// every rank of a job builds the same initial parameters and the only thing
// that can make ranks drift apart is the gradient exchange under test.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tool/train/data.h"

namespace ddph::tool {

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> value;
  std::vector<float> grad;
  int layer = 0;  // which Linear layer owns it; backward finishes layers last-to-first
  int64_t numel() const { return static_cast<int64_t>(value.size()); }
};

// Linear -> ReLU -> ... -> Linear. Parameters in forward order:
// W1 [h1, in], b1 [h1], W2, b2, ..., the way PyTorch's named_parameters lists them.
class Mlp {
 public:
  Mlp(const std::vector<int>& sizes, uint64_t seed);

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  int num_layers() const { return static_cast<int>(sizes_.size()) - 1; }

  // Logits for a batch (rows of x), keeping activations for backward.
  const std::vector<float>& forward(const float* x, int batch);
  // Mean cross-entropy of the last forward against labels, and the number of
  // rows whose arg-max logit is the label.
  double loss(const int* labels, int* correct) const;
  // Fills every Param::grad with d(mean loss)/d(param) for the last forward.
  // Calls layer_done(l) right after layer l's grads are final, last layer
  // first, so a caller can start communicating while earlier layers still
  // compute (the overlap DDP gets from autograd hooks).
  void backward(const int* labels, const std::function<void(int layer)>& layer_done = {});
  // Fraction of rows of d the model classifies correctly. Overwrites the
  // activations of the last forward.
  double accuracy(const Dataset& d);
  // Mean cross-entropy over the whole dataset: a deterministic figure for
  // comparing runs, unlike the minibatch losses of the log.
  double mean_loss(const Dataset& d);

 private:
  std::vector<int> sizes_;
  std::vector<Param> params_;
  int batch_ = 0;
  std::vector<std::vector<float>> acts_;  // acts_[0] = input, acts_[l+1] = output of layer l
};

// Momentum SGD in PyTorch's form: v = mu * v + g; p -= lr * v.
class Sgd {
 public:
  Sgd(double lr, double momentum) : lr_(lr), momentum_(momentum) {}
  void set_lr(double lr) { lr_ = lr; }
  void step(std::vector<Param>& params);

 private:
  double lr_, momentum_;
  std::vector<std::vector<float>> velocity_;
};

// FNV-1a over the bytes of every parameter value: equal hashes across ranks
// mean bit-identical models.
uint64_t hash_params(const std::vector<Param>& params);

}  // namespace ddph::tool
