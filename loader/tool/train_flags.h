// Flag parsing shared by `ddph train` and `ddph bench`: "--name value" or
// "--name=value", with errors that name the flag.
#pragma once

#include <stdexcept>
#include <string>

namespace ddph_tool {

class Flags {
 public:
  Flags(int argc, char** argv) : argc_(argc), argv_(argv) {}
  // Advances to the next argument; false at the end. Throws on a non-flag.
  bool next();
  const std::string& name() const { return name_; }
  bool is(const char* n) const { return name_ == n; }
  // The current flag's value (the inline "=value" or the next argument).
  std::string value();
  long long int_value(long long min, long long max);
  double double_value(double min, double max);

 private:
  int argc_;
  char** argv_;
  int i_ = 0;  // argv[0] is the subcommand
  std::string name_;
  std::string inline_value_;
  bool has_inline_ = false;
};

}  // namespace ddph_tool
