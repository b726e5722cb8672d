// Reads the names a shared object exports from its own dynamic symbol table
// (.dynsym), without running any of its code and without binutils: nm is not
// on every machine a plugin author validates on.
#pragma once

#include <string>
#include <vector>

namespace ddph::plugin_checks {

// Defined global/weak symbols of default or protected visibility in the ELF
// file at path. On failure returns false with the reason in *error.
bool exported_symbols(const std::string& path, std::vector<std::string>* names, std::string* error);

}  // namespace ddph::plugin_checks
