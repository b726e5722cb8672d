#include "tool/bench/params.h"

#include <cstdlib>
#include <stdexcept>

namespace ddph::tool {

void fill_gradients(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(rank) * 40503u;
    v[i] = static_cast<float>((h >> 8) % 2000) / 1000.0f - 1.0f;
  }
}

void parse_matrix(const std::string& text, int64_t* rows, int64_t* cols) {
  const size_t x = text.find('x');
  char* end = nullptr;
  const std::string r = text.substr(0, x), c = x == std::string::npos ? "" : text.substr(x + 1);
  const long long nr = std::strtoll(r.c_str(), &end, 10);
  const bool rows_ok = !r.empty() && *end == '\0' && nr >= 1;
  const long long nc = std::strtoll(c.c_str(), &end, 10);
  const bool cols_ok = !c.empty() && *end == '\0' && nc >= 1;
  if (!rows_ok || !cols_ok || nr > (1LL << 31) || nc > (1LL << 31))
    throw std::invalid_argument(
        "--matrix must be ROWSxCOLS with both in [1, 2^31], e.g. 1024x1024, not '" + text + "'");
  *rows = nr;
  *cols = nc;
}

BenchParams::BenchParams(int64_t numel, int64_t rows, int64_t cols) {
  int64_t left = numel;
  if (rows > 0) {
    for (; left >= rows * cols; left -= rows * cols) {
      shapes_.push_back({rows, cols});
      numels_.push_back(rows * cols);
    }
  }
  if (left > 0 || shapes_.empty()) {
    shapes_.push_back({left});
    numels_.push_back(left);
  }
}

BucketPlan BenchParams::plan() const {
  BucketPlan plan;
  for (size_t p = 0; p < numels_.size(); ++p) {
    plan.slots.push_back(BucketSlot{int(p), plan.numel, numels_[p]});
    plan.numel += numels_[p];
  }
  return plan;
}

std::vector<const std::vector<int64_t>*> BenchParams::shapes() const {
  std::vector<const std::vector<int64_t>*> out;
  for (const auto& s : shapes_) out.push_back(&s);
  return out;
}

}  // namespace ddph::tool
