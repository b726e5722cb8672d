// The host table that the loader gave this shared object. Each plugin keeps
// its own copy (core is linked statically into every plugin).
#pragma once

#include <ddph/ddph.h>

#include <string>

namespace ddph {

// Accepts the table if it is v1-compatible; returns false otherwise.
bool set_host(const ddph_host_t* host);
const ddph_host_t* host();

void log(ddph_log_level_t level, const char* family, const std::string& message);

}  // namespace ddph
