// A bounded first pass over a YAML document's parser events, made before
// yaml-cpp builds nodes. yaml-cpp shares an aliased node instead of copying
// it, so a few hundred bytes can describe a tree of billions of nodes (an
// "alias bomb"), or an endless one (an alias inside its own anchor); the
// config reader walks that tree and would pay for every expanded node. This
// pass counts what the walk will visit and stops at the first limit crossed,
// in time and memory proportional to the text up to that point.
#pragma once

#include <yaml-cpp/mark.h>

#include <cstdint>
#include <string>

namespace ddph {
namespace loader {

// The largest shipped job file has 6 levels and 40 nodes; these leave room
// for generated files (thousands of rules) while the worst case the walk may
// then take is a few milliseconds and a few MB.
struct YamlLimits {
  int max_depth = 64;           // nesting levels, aliases expanded
  uint64_t max_nodes = 100000;  // keys, values and collections, aliases expanded
  uint64_t max_aliases = 1000;  // aliases written in the text
};

struct YamlLimitBreach {
  YAML::Mark mark;  // where the pass stopped
  std::string message;
};

// Walks the first document of text (the one YAML::Load reads). True when it
// stays within limits, no alias refers to a node that contains it and no
// second document follows (YAML::Load would ignore it, and with it whatever
// the user wrote there; the breach's mark is where it starts); false with
// *breach filled otherwise. Throws YAML::Exception on malformed YAML.
bool check_yaml_limits(const std::string& text, const YamlLimits& limits, YamlLimitBreach* breach);

}  // namespace loader
}  // namespace ddph
