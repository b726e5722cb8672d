// Every pair (a[i], b[i]) of huge, ordinary and non-finite floats: the
// operands the huge-value rules (plugins/powersgd/huge_values.h) are
// checked on, on the host (math_test.cpp) and against it on a GPU
// (gpu_math_test.cpp).
#pragma once

#include <cfloat>
#include <cmath>
#include <vector>

namespace ddph_test {
namespace psgd {

inline void huge_operand_pairs(std::vector<float>& a, std::vector<float>& b) {
  const float values[] = {3e38f, -3e38f, FLT_MAX, -FLT_MAX, 1e38f,     -2.5e38f,
                          1.0f,  -0.5f,  0.0f,    INFINITY, -INFINITY, std::nanf("")};
  a.clear();
  b.clear();
  for (float x : values)
    for (float y : values) a.push_back(x), b.push_back(y);
}

}  // namespace psgd
}  // namespace ddph_test
