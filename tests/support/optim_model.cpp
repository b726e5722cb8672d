#include "tests/support/optim_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "tests/support/torch_ref.h"

namespace ddph_test {
namespace optim {

const std::vector<std::vector<int64_t>>& shapes() {
  static const std::vector<std::vector<int64_t>> s = {{3, 4}, {5}, {2, 2, 3}, {7}};
  return s;
}

size_t numel(int param) {
  size_t n = 1;
  for (int64_t d : shapes()[size_t(param)]) n *= size_t(d);
  return n;
}

size_t total_numel() {
  size_t n = 0;
  for (int p = 0; p < kParams; ++p) n += numel(p);
  return n;
}

float initial(int param, size_t i) {
  const uint32_t h = uint32_t(i) * 2654435761u + uint32_t(param) * 97u;
  return float(int((h >> 7) % 2001) - 1000) / 1000.0f;
}

float gradient(int rank, uint64_t step, int param, size_t i) {
  const uint32_t h = uint32_t(i) * 2246822519u + uint32_t(param) * 3266489917u +
                     uint32_t(step) * 668265263u + uint32_t(rank) * 374761393u;
  // Some gradients near zero, some large, so Adam's denominator and eps matter.
  const float v = float(int((h >> 9) % 4001) - 2000) / 1000.0f;
  return (h & 3) == 0 ? v * 1e-3f : v;
}

std::string yaml(const std::string& options, const std::string& inner, const std::string& hook) {
  const size_t slash = hook.find('/');
  return "comm: {backend: gloo, timeout: 30s}\n"
         "hook:\n"
         "  family: " +
         hook.substr(0, slash) +
         "\n"
         "  name: " +
         hook.substr(slash + 1) +
         "\n"
         "  options: {" +
         options +
         "}\n"
         "  wrap: " +
         inner + "\n";
}

Model::Model(GradMode mode) : mode_(mode), shapes_(shapes()) {
  for (int p = 0; p < kParams; ++p) {
    params.emplace_back(numel(p));
    for (size_t i = 0; i < numel(p); ++i) params.back()[i] = initial(p, i);
  }
  regroup({{0, 1}, {2, 3}});
}

void Model::regroup(const std::vector<std::vector<int>>& layout) {
  for (int b = 0; b < 2; ++b) {
    Bucket& bk = buckets_[b];
    bk = Bucket{};
    for (int p : layout[size_t(b)]) {
      ddph_param_t v{};
      v.struct_size = sizeof v;
      v.offset = bk.numel;
      v.ndim = int32_t(shapes_[size_t(p)].size());
      v.shape = shapes_[size_t(p)].data();
      v.data.data = params[size_t(p)].data();
      v.data.device = {kDLCPU, 0};
      v.data.ndim = v.ndim;
      v.data.dtype = {kDLFloat, 32, 1};
      v.data.shape = const_cast<int64_t*>(v.shape);
      bk.views.push_back(v);
      bk.owners.push_back(p);
      bk.ids.push_back(p);
      bk.numel += int64_t(numel(p));
    }
    bk.grads.resize(size_t(bk.numel));
    bk.low.resize(size_t(bk.numel));
  }
}

void Model::hide(int param) {
  for (Bucket& b : buckets_)
    for (size_t k = 0; k < b.views.size(); ++k)
      if (b.owners[k] == param) b.views[k].data.data = nullptr;
}

namespace {
struct StepErrors {
  std::mutex mu;
  ddph_code_t code = DDPH_OK;
  std::string message;
  static void on_done(void* user, ddph_error_t* e) {
    auto* s = static_cast<StepErrors*>(user);
    if (e != nullptr) {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->code == DDPH_OK) {
        s->code = ddph_error_code(e);
        s->message = ddph_error_message(e);
      }
    }
    ddph_error_free(e);
  }
};
}  // namespace

ddph_code_t Model::step(ddph_session_t* s, int rank, uint64_t step, std::string* message) {
  StepErrors errors;
  for (int b = 0; b < 2; ++b) {
    Bucket& bk = buckets_[b];
    for (size_t k = 0; k < bk.views.size(); ++k)
      for (size_t i = 0; i < numel(bk.owners[k]); ++i) {
        const size_t at = size_t(bk.views[k].offset) + i;
        bk.grads[at] = gradient(rank, step, bk.owners[k], i);
        if (mode_ == GradMode::kF32) continue;
        uint32_t bits;
        std::memcpy(&bits, &bk.grads[at], 4);
        bk.low[at] = uint16_t(bits >> 16);  // exact: the upper half of the float
        bits &= 0xffff0000u;
        std::memcpy(&bk.grads[at], &bits, 4);
      }
    if (edit_grads && mode_ == GradMode::kF32) edit_grads(step, b, bk.grads);
    ddph_bucket_t bucket{};
    bucket.struct_size = sizeof bucket;
    bucket.index = uint64_t(b);
    bucket.step = step;
    bucket.is_last = b == 1;
    const bool low = mode_ == GradMode::kBF16;
    bucket.buffer.data = low ? static_cast<void*>(bk.low.data()) : bk.grads.data();
    bucket.buffer.device = {kDLCPU, 0};
    bucket.buffer.ndim = 1;
    bucket.buffer.dtype = low ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
    bucket.buffer.shape = &bk.numel;
    bucket.num_params = bk.views.size();
    bucket.params = bk.views.data();
    for (size_t k = 0; k < bk.ids.size(); ++k) {
      auto id = id_of.find(bk.owners[k]);
      bk.ids[k] = id != id_of.end() ? id->second : bk.owners[k];
    }
    bucket.param_ids = with_ids ? bk.ids.data() : nullptr;
    if (ddph_error_t* e = ddph_session_submit(s, &bucket, &StepErrors::on_done, &errors)) {
      if (message) *message = ddph_error_message(e);
      ddph_code_t code = ddph_error_code(e);
      ddph_error_free(e);
      ddph_error_free(ddph_session_flush(s));
      return code;
    }
  }
  ddph_error_free(ddph_session_flush(s));
  if (message) *message = errors.message;
  if (errors.code != DDPH_OK)
    std::fprintf(stderr, "step %d: %s\n", int(step), errors.message.c_str());
  return errors.code;
}

std::vector<float> Model::flat() const {
  std::vector<float> out;
  for (const auto& p : params) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void Model::set_flat(const std::vector<float>& values) {
  size_t at = 0;
  for (auto& p : params)
    for (float& v : p) v = values[at++];
}

std::map<std::string, std::vector<float>> torch_optim_reference(
    const std::vector<int>& worlds,
    const std::vector<std::pair<std::string, std::string>>& makers) {
  std::vector<float> init, grads;
  for (int p = 0; p < kParams; ++p)
    for (size_t i = 0; i < numel(p); ++i) init.push_back(initial(p, i));
  std::string worlds_text = "[";
  for (size_t s = 0; s < worlds.size(); ++s) {
    worlds_text += std::to_string(worlds[s]) + ",";
    for (int r = 0; r < worlds[s]; ++r)
      for (int p = 0; p < kParams; ++p)
        for (size_t i = 0; i < numel(p); ++i) grads.push_back(gradient(r, uint64_t(s), p, i));
  }
  worlds_text += "]";
  std::string shapes_text = "[";
  for (const auto& s : shapes()) {
    shapes_text += "(";
    for (int64_t d : s) shapes_text += std::to_string(d) + ",";
    shapes_text += "),";
  }
  shapes_text += "]";
  std::string script =
      "import sys, numpy as np, torch\n"
      "d = sys.argv[1]\n"
      "shapes = " +
      shapes_text +
      "\n"
      "worlds = " +
      worlds_text +
      "\n"
      "sizes = [int(np.prod(s)) for s in shapes]\n"
      "total = sum(sizes)\n"
      "init = np.fromfile(d + '/init', dtype=np.float32)\n"
      "grads = np.fromfile(d + '/grads', dtype=np.float32).reshape(-1, total)\n"
      "def split(flat):\n"
      "    out, at = [], 0\n"
      "    for s, n in zip(shapes, sizes):\n"
      "        out.append(torch.from_numpy(flat[at:at + n].copy()).reshape(s)); at += n\n"
      "    return out\n"
      "def run(name, make):\n"
      "    ps = [torch.nn.Parameter(t) for t in split(init)]\n"
      "    opt = make(ps)\n"
      "    row = 0\n"
      "    for w in worlds:\n"
      "        # default/allreduce: each rank's value divided by the world size, then summed\n"
      "        mean = torch.zeros(total, dtype=torch.float32)\n"
      "        for r in range(w):\n"
      "            mean = mean + torch.from_numpy(grads[row + r]) / w\n"
      "        row += w\n"
      "        for p, g in zip(ps, split(mean.numpy())):\n"
      "            p.grad = g.clone()\n"
      "        opt.step()\n"
      "    np.concatenate([p.detach().numpy().ravel() for p in ps]).astype(np.float32)"
      ".tofile(d + '/out_' + name)\n";
  std::vector<std::string> names;
  for (const auto& m : makers) {
    script += "run('" + m.first + "', lambda ps: " + m.second + ")\n";
    names.push_back("out_" + m.first);
  }
  Blobs blobs = run_torch(script, {{"init", to_blob(init)}, {"grads", to_blob(grads)}}, names);
  std::map<std::string, std::vector<float>> out;
  for (const auto& m : makers) out[m.first] = from_blob<float>(blobs.at("out_" + m.first));
  return out;
}

WorstElement worst_element(const std::vector<float>& got, const std::vector<float>& want,
                           const std::function<double(double)>& tolerance) {
  WorstElement w;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double ratio = std::fabs(double(got[i]) - want[i]) / tolerance(want[i]);
    if (ratio > w.ratio) w = WorstElement{ratio, i};
  }
  return w;
}

}  // namespace optim
}  // namespace ddph_test
