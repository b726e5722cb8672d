// A small model for the tests of hooks that step an optimizer
// (hook_then_optimizer, the zero hooks): four parameters of mixed shapes in
// two buckets (params 0, 1 in bucket 0; params 2, 3 in bucket 1), with
// deterministic rank- and step-dependent gradients that every rank (and the
// PyTorch reference) can compute for every rank.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ddph_test {
namespace optim {

constexpr int kParams = 4;
const std::vector<std::vector<int64_t>>& shapes();
size_t numel(int param);
size_t total_numel();

float initial(int param, size_t i);
float gradient(int rank, uint64_t step, int param, size_t i);

// "comm: ...\nhook: {family: <family>, name: <name>, options: {<options>},
//  wrap: <inner>}", hook being "<family>/<name>".
std::string yaml(const std::string& options,
                 const std::string& inner = "{family: default, name: allreduce}",
                 const std::string& hook = "optimizer_overlap/hook_then_optimizer");

// One optimizer as a hook's YAML options and as torch.optim builds it, for
// the parity tests.
struct OptimizerCase {
  const char* name;
  const char* options;  // the hook's YAML options
  const char* torch;    // torch.optim constructor, given the parameter list `ps`
};

// torch.optim on the model, run by one /usr/bin/python3: step s on the
// mean of the gradients of ranks 0 .. worlds[s] - 1 (as default/allreduce
// forms it: each divided by the world size, summed in rank order), so a run
// may change its world size midway (a checkpoint loaded at another world).
// makers maps a case name to a torch.optim constructor given the parameter
// list `ps` ("torch.optim.SGD(ps, lr=0.1, foreach=False)"); returns each
// case's final parameters, concatenated in parameter order.
std::map<std::string, std::vector<float>> torch_optim_reference(
    const std::vector<int>& worlds, const std::vector<std::pair<std::string, std::string>>& makers);

// The element of got farthest from want (same length) in units of its
// tolerance, tolerance(want[i]): ratio <= 1 when every element is within.
struct WorstElement {
  double ratio = 0;
  size_t at = 0;
};
WorstElement worst_element(const std::vector<float>& got, const std::vector<float>& want,
                           const std::function<double(double)>& tolerance);

// How Model::step hands over gradients: float32 buckets; float32 buckets
// of values rounded toward zero to bfloat16; or bfloat16 buckets of those
// same values (the hook upcasts them, so the last two must step alike).
enum class GradMode { kF32, kBF16Values, kBF16 };

// The parameters and the two buckets that lend them to the hook.
class Model {
 public:
  explicit Model(GradMode mode = GradMode::kF32);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  std::vector<std::vector<float>> params;
  // Fills both buckets with rank's gradients of step, submits them in index
  // order and flushes; returns the first error's code, its text in *message.
  ddph_code_t step(ddph_session_t* s, int rank, uint64_t step, std::string* message = nullptr);
  // Every parameter value, concatenated in parameter order.
  std::vector<float> flat() const;
  void set_flat(const std::vector<float>& values);
  // Makes params[p].data NULL in the buckets (the host does not share it).
  void hide(int param);
  // Regroups the parameters into two buckets, as DDP's bucket rebuild does:
  // layout[b] lists bucket b's parameters in order ({{0, 1}, {2, 3}} at
  // first).
  void regroup(const std::vector<std::vector<int>>& layout);
  // Whether step() passes each parameter's index as its id (ABI 1.2).
  bool with_ids = false;
  // with_ids: the id step() passes for a parameter instead of its index
  // (two parameters under one id, say).
  std::map<int, int64_t> id_of;
  // GradMode::kF32: called with each bucket's gradients (bucket 0 holds
  // params 0 and 1, bucket 1 params 2 and 3, unless regrouped) before
  // step() submits it, to plant a NaN, say.
  std::function<void(uint64_t step, int bucket, std::vector<float>& grads)> edit_grads;

 private:
  GradMode mode_;
  struct Bucket {
    std::vector<float> grads;
    std::vector<uint16_t> low;  // kBF16: the bucket's buffer
    int64_t numel = 0;
    std::vector<ddph_param_t> views;
    std::vector<int> owners;   // model parameter of each view
    std::vector<int64_t> ids;  // the same, as bucket.param_ids
  };
  Bucket buckets_[2];
  std::vector<std::vector<int64_t>> shapes_;
};

}  // namespace optim
}  // namespace ddph_test
