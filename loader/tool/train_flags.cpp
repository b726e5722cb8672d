#include "loader/tool/train_flags.h"

#include <cstdlib>

namespace ddph_tool {

bool Flags::next() {
  if (++i_ >= argc_) return false;
  std::string arg = argv_[i_];
  if (arg.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + arg + "'");
  size_t eq = arg.find('=');
  has_inline_ = eq != std::string::npos;
  name_ = arg.substr(0, eq);
  inline_value_ = has_inline_ ? arg.substr(eq + 1) : std::string();
  return true;
}

std::string Flags::value() {
  if (has_inline_) return inline_value_;
  if (i_ + 1 >= argc_) throw std::invalid_argument(name_ + " needs a value");
  return argv_[++i_];
}

long long Flags::int_value(long long min, long long max) {
  std::string v = value();
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < min || x > max)
    throw std::invalid_argument(name_ + " must be an integer in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], not '" + v + "'");
  return x;
}

double Flags::double_value(double min, double max) {
  std::string v = value();
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= min && x <= max))
    throw std::invalid_argument(name_ + " must be a number in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], not '" + v + "'");
  return x;
}

}  // namespace ddph_tool
