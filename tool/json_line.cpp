#include "tool/json_line.h"

#include <cmath>
#include <cstdio>

namespace ddph::tool {

void print_json_line(const Json& j) {
  const std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

Json json_number(double v) {
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9.2e18)
    return static_cast<int64_t>(v);
  return v;  // nlohmann prints NaN and infinities as null
}

}  // namespace ddph::tool
