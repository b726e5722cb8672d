// Option schemas and values: making specs, parsing YAML text against a spec,
// and reading the typed values a hook's create() receives.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace ddph {

// Spec makers. min > max means unbounded.
ddph_option_spec_t spec_bool(const char* name, const char* default_value, const char* doc);
ddph_option_spec_t spec_int(const char* name, const char* default_value, const char* doc,
                            double min_value = 1, double max_value = 0,
                            const char* choices = nullptr);
ddph_option_spec_t spec_float(const char* name, const char* default_value, const char* doc,
                              double min_value = 1, double max_value = 0);
ddph_option_spec_t spec_string(const char* name, const char* default_value, const char* doc,
                               const char* choices = nullptr);

const char* type_name(ddph_type_t type);
// An option bound or value as people read it, the same in every message:
// integers in full (1048576, 9007199254740992), others with up to 6
// significant digits (0.001, 1e+300).
std::string format_number(double v);

// A complete, owned list of option values, in schema order.
class OptionList {
 public:
  // Sets spec's value from text (YAML scalar text). Throws
  // DDPH_INVALID_ARGUMENT saying what was expected and what was found.
  void add(const ddph_option_spec_t& spec, const std::string& text);
  const ddph_option_t* data() const { return values_.data(); }
  size_t size() const { return values_.size(); }

 private:
  std::deque<std::string> strings_;  // deque: element addresses stay put
  std::vector<ddph_option_t> values_;
};

// Resolves given (name, text) pairs against a schema, filling defaults.
// Throws on an unknown name (listing the known ones) or a missing required one.
OptionList resolve_options(const ddph_option_spec_t* specs, size_t num_specs,
                           const std::vector<std::pair<std::string, std::string>>& given);

// Read access to the values handed to create().
class Options {
 public:
  Options(const ddph_option_t* options, size_t num_options);
  // Whether an option of that name was given (a host may pass none at all).
  bool has(const char* name) const;
  bool get_bool(const char* name) const;
  int64_t get_int(const char* name) const;
  double get_float(const char* name) const;
  std::string get_string(const char* name) const;

 private:
  const ddph_option_t& find(const char* name, ddph_type_t type) const;
  const ddph_option_t* options_;
  size_t num_options_;
};

}  // namespace ddph
