#include "tests/support/shaped_bucket.h"

#include <cstdio>

#include "tests/support/session_ranks.h"

namespace ddph_test {

int64_t numel_of(const std::vector<Shape>& shapes) {
  int64_t n = 0;
  for (const Shape& s : shapes) {
    int64_t k = 1;
    for (int64_t d : s) k *= d;
    n += k;
  }
  return n;
}

ShapedBucket::ShapedBucket(std::vector<float>& data, const std::vector<Shape>& shapes,
                           uint64_t index, uint64_t step, bool is_last)
    : shapes_(shapes), flat_(data, index, step, is_last) {
  int64_t offset = 0;
  for (const Shape& s : shapes_) {
    ddph_param_t p{};
    p.struct_size = sizeof p;
    p.offset = offset;
    p.ndim = int32_t(s.size());
    p.shape = s.data();
    params_.push_back(p);
    offset += numel_of({s});
  }
  flat_.bucket.num_params = params_.size();
  flat_.bucket.params = params_.empty() ? nullptr : params_.data();
}

ddph_code_t run_shaped(ddph_session_t* s, std::vector<float>& data,
                       const std::vector<Shape>& shapes, uint64_t index, uint64_t step,
                       bool is_last, std::string* message) {
  ShapedBucket b(data, shapes, index, step, is_last);
  std::string text;
  const ddph_code_t code = run_bucket(s, *b.get(), &text);
  if (code != DDPH_OK) std::fprintf(stderr, "bucket %d: %s\n", int(index), text.c_str());
  if (message != nullptr) *message = text;
  return code;
}

}  // namespace ddph_test
