#include "core/base/options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/base/abi_struct.h"
#include "core/base/error.h"

namespace ddph {
namespace {

ddph_option_spec_t make_spec(const char* name, ddph_type_t type, const char* default_value,
                             const char* doc, double lo, double hi, const char* choices) {
  return abi_struct<ddph_option_spec_t>(name, type, default_value, doc, lo, hi, choices);
}

bool in_choices(const char* choices, const std::string& v) {
  const char* p = choices;
  while (true) {
    const char* bar = std::strchr(p, '|');
    size_t len = bar ? size_t(bar - p) : std::strlen(p);
    if (v.size() == len && v.compare(0, len, p, len) == 0) return true;
    if (!bar) return false;
    p = bar + 1;
  }
}

void check_range(const ddph_option_spec_t& spec, double v, const std::string& text) {
  if (spec.min_value > spec.max_value) return;
  DDPH_CHECK(v >= spec.min_value && v <= spec.max_value, DDPH_INVALID_ARGUMENT,
             "option '" << spec.name << "' is " << text << ", outside its range ["
                        << format_number(spec.min_value) << ", " << format_number(spec.max_value)
                        << "]");
}

}  // namespace

ddph_option_spec_t spec_bool(const char* name, const char* def, const char* doc) {
  return make_spec(name, DDPH_BOOL, def, doc, 1, 0, nullptr);
}
ddph_option_spec_t spec_int(const char* name, const char* def, const char* doc, double lo,
                            double hi, const char* choices) {
  return make_spec(name, DDPH_INT, def, doc, lo, hi, choices);
}
ddph_option_spec_t spec_float(const char* name, const char* def, const char* doc, double lo,
                              double hi) {
  return make_spec(name, DDPH_FLOAT, def, doc, lo, hi, nullptr);
}
ddph_option_spec_t spec_string(const char* name, const char* def, const char* doc,
                               const char* choices) {
  return make_spec(name, DDPH_STRING, def, doc, 1, 0, choices);
}

std::string format_number(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9.3e18)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

const char* type_name(ddph_type_t type) {
  switch (type) {
    case DDPH_BOOL: return "bool";
    case DDPH_INT: return "int";
    case DDPH_FLOAT: return "float";
    case DDPH_STRING: return "string";
  }
  return "?";
}

void OptionList::add(const ddph_option_spec_t& spec, const std::string& text) {
  ddph_option_t o{};
  o.struct_size = sizeof o;
  strings_.push_back(spec.name);
  o.name = strings_.back().c_str();
  o.type = spec.type;
  switch (spec.type) {
    case DDPH_BOOL:
      if (text == "true" || text == "True" || text == "TRUE" || text == "yes" || text == "on")
        o.value.b = 1;
      else if (text == "false" || text == "False" || text == "FALSE" || text == "no" ||
               text == "off")
        o.value.b = 0;
      else
        DDPH_FAIL(DDPH_INVALID_ARGUMENT,
                  "option '" << spec.name << "' expects a bool (true or false), got '" << text << "'");
      break;
    case DDPH_INT: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 0);
      DDPH_CHECK(!text.empty() && *end == '\0' && errno == 0, DDPH_INVALID_ARGUMENT,
                 "option '" << spec.name << "' expects an int, got '" << text << "'");
      check_range(spec, double(v), text);
      DDPH_CHECK(spec.choices == nullptr || in_choices(spec.choices, std::to_string(v)),
                 DDPH_INVALID_ARGUMENT,
                 "option '" << spec.name << "' is " << text << "; expected one of " << spec.choices);
      o.value.i = v;
      break;
    }
    case DDPH_FLOAT: {
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      DDPH_CHECK(!text.empty() && *end == '\0', DDPH_INVALID_ARGUMENT,
                 "option '" << spec.name << "' expects a finite float, got '" << text << "'");
      // ERANGE: past a double's range (1e400: strtod gives +-HUGE_VAL), or
      // below its smallest normal magnitude (1e-320: the nearest subnormal or
      // 0, what Python and C read too, so taken). Floats are doubles here.
      DDPH_CHECK(!(errno == ERANGE && std::isinf(v)), DDPH_INVALID_ARGUMENT,
                 "option '" << spec.name << "' is " << text
                            << ", outside the range of a float (a double: magnitudes up to "
                               "1.79769e+308)");
      DDPH_CHECK(std::isfinite(v), DDPH_INVALID_ARGUMENT,
                 "option '" << spec.name << "' expects a finite float, got '" << text << "'");
      check_range(spec, v, text);
      o.value.f = v;
      break;
    }
    case DDPH_STRING:
      DDPH_CHECK(spec.choices == nullptr || in_choices(spec.choices, text), DDPH_INVALID_ARGUMENT,
                 "option '" << spec.name << "' is '" << text << "'; expected one of "
                            << spec.choices);
      strings_.push_back(text);
      o.value.s = strings_.back().c_str();
      break;
    default:
      DDPH_FAIL(DDPH_INVALID_ARGUMENT,
                "option '" << spec.name << "' has an unknown type " << int(spec.type));
  }
  values_.push_back(o);
}

OptionList resolve_options(const ddph_option_spec_t* specs, size_t num_specs,
                           const std::vector<std::pair<std::string, std::string>>& given) {
  for (const auto& kv : given) {
    bool known = false;
    for (size_t i = 0; i < num_specs && !known; ++i) known = kv.first == specs[i].name;
    if (!known) {
      std::string names;
      for (size_t i = 0; i < num_specs; ++i) names += (i ? ", " : "") + std::string(specs[i].name);
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, "unknown option '" << kv.first << "' (known: "
                                                         << (names.empty() ? "none" : names) << ")");
    }
  }
  OptionList list;
  for (size_t i = 0; i < num_specs; ++i) {
    const ddph_option_spec_t& spec = specs[i];
    const std::string* text = nullptr;
    for (const auto& kv : given)
      if (kv.first == spec.name) text = &kv.second;
    if (text != nullptr) {
      list.add(spec, *text);
    } else {
      DDPH_CHECK(spec.default_value != nullptr, DDPH_INVALID_ARGUMENT,
                 "option '" << spec.name << "' is required (" << spec.doc << ")");
      list.add(spec, spec.default_value);
    }
  }
  return list;
}

Options::Options(const ddph_option_t* options, size_t num_options)
    : options_(options), num_options_(num_options) {
  DDPH_CHECK(num_options == 0 || options != nullptr, DDPH_INVALID_ARGUMENT,
             "init.options is NULL but init.num_options is " << num_options);
}

bool Options::has(const char* name) const {
  for (size_t i = 0; i < num_options_; ++i)
    if (options_[i].name != nullptr && std::strcmp(options_[i].name, name) == 0) return true;
  return false;
}

const ddph_option_t& Options::find(const char* name, ddph_type_t type) const {
  for (size_t i = 0; i < num_options_; ++i) {
    const ddph_option_t& o = options_[i];
    if (o.name != nullptr && std::strcmp(o.name, name) == 0) {
      DDPH_CHECK(o.type == type, DDPH_INVALID_ARGUMENT,
                 "option '" << name << "' has type " << type_name(o.type) << ", expected "
                            << type_name(type));
      return o;
    }
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT, "option '" << name << "' is missing");
}

bool Options::get_bool(const char* name) const { return find(name, DDPH_BOOL).value.b != 0; }
int64_t Options::get_int(const char* name) const { return find(name, DDPH_INT).value.i; }
double Options::get_float(const char* name) const { return find(name, DDPH_FLOAT).value.f; }
std::string Options::get_string(const char* name) const {
  const char* s = find(name, DDPH_STRING).value.s;
  DDPH_CHECK(s != nullptr, DDPH_INVALID_ARGUMENT, "option '" << name << "' is a NULL string");
  return s;
}

}  // namespace ddph
