// ABI checks of a plugin's description and every table it points to. A
// plugin that passes these can be called without further size checks.
#include <string>

#include "core/base/error.h"
#include "loader/registry/registry.h"

namespace ddph {
namespace loader {
namespace {

// Too small a struct means the plugin was built against something older than
// v1.0 (or is not a ddphooks plugin): a version problem, not misuse.
void check_size(size_t got, size_t v1_0, const std::string& what, const std::string& file) {
  DDPH_CHECK(got >= v1_0, DDPH_VERSION_MISMATCH,
             "plugin " << file << ": " << what << ".struct_size is " << got
                       << ", smaller than the ABI v1.0 size " << v1_0);
}

void check_specs(const ddph_option_spec_t* specs, size_t n, const std::string& what,
                 const std::string& file) {
  DDPH_CHECK(n == 0 || specs != nullptr, DDPH_INVALID_ARGUMENT,
             "plugin " << file << ": " << what << ".options is NULL with num_options " << n);
  for (size_t i = 0; i < n; ++i) {
    std::string spec = what + ".options[" + std::to_string(i) + "]";
    check_size(specs[i].struct_size, DDPH_OPTION_SPEC_SIZE_V1_0, spec, file);
    DDPH_CHECK(specs[i].name != nullptr && specs[i].name[0] != '\0', DDPH_INVALID_ARGUMENT,
               "plugin " << file << ": " << spec << ".name is NULL or empty");
    DDPH_CHECK(specs[i].type >= DDPH_BOOL && specs[i].type <= DDPH_STRING, DDPH_INVALID_ARGUMENT,
               "plugin " << file << ": " << spec << ".type " << int(specs[i].type)
                         << " is not a ddph_type_t");
  }
}

// Entry i of one of the description's arrays (`array`: "hooks", "comms"):
// not NULL, and at least the v1.0 size of its `type`.
template <class T>
const T& entry_at(const T* const* entries, size_t i, const char* array, const char* type,
                  size_t v1_0, const std::string& file) {
  const std::string what = std::string(array) + "[" + std::to_string(i) + "]";
  DDPH_CHECK(entries[i] != nullptr, DDPH_INVALID_ARGUMENT,
             "plugin " << file << ": " << what << " is NULL");
  check_size(entries[i]->struct_size, v1_0, std::string(type) + " " + what, file);
  return *entries[i];
}

}  // namespace

void check_plugin_desc(const ddph_plugin_t* desc, const std::string& expected_family,
                       const std::string& file) {
  // The versions come right after struct_size in every ABI version, so they can
  // be read (and reported) before the rest of the size is judged.
  if (desc->struct_size < DDPH_SIZE_THROUGH(ddph_plugin_t, abi_minor))
    check_size(desc->struct_size, DDPH_PLUGIN_SIZE_V1_0, "ddph_plugin_t", file);
  DDPH_CHECK(desc->abi_major == DDPH_ABI_MAJOR, DDPH_VERSION_MISMATCH,
             "plugin " << file << " was built for ABI " << desc->abi_major << "." << desc->abi_minor
                       << ", but this loader implements ABI " << DDPH_ABI_MAJOR << "."
                       << DDPH_ABI_MINOR << " (the major versions must match)");
  check_size(desc->struct_size, DDPH_PLUGIN_SIZE_V1_0, "ddph_plugin_t", file);
  DDPH_CHECK(desc->family != nullptr && expected_family == desc->family, DDPH_INVALID_ARGUMENT,
             "plugin " << file << " calls its family '" << (desc->family ? desc->family : "(NULL)")
                       << "', but its file name says '" << expected_family << "'");
  DDPH_CHECK(desc->num_hooks == 0 || desc->hooks != nullptr, DDPH_INVALID_ARGUMENT,
             "plugin " << file << ": hooks is NULL with num_hooks " << desc->num_hooks);
  for (size_t i = 0; i < desc->num_hooks; ++i) {
    const ddph_hook_t& h =
        entry_at(desc->hooks, i, "hooks", "ddph_hook_t", DDPH_HOOK_SIZE_V1_0, file);
    DDPH_CHECK(h.name != nullptr && h.name[0] != '\0', DDPH_INVALID_ARGUMENT,
               "plugin " << file << ": hooks[" << i << "].name is NULL or empty");
    const std::string what = "hook '" + std::string(h.name) + "'";
    DDPH_CHECK(h.create != nullptr && h.run_bucket != nullptr && h.destroy != nullptr,
               DDPH_INVALID_ARGUMENT,
               "plugin " << file << ": " << what << " lacks create, run_bucket or destroy");
    DDPH_CHECK((h.save_state == nullptr) == (h.load_state == nullptr), DDPH_INVALID_ARGUMENT,
               "plugin " << file << ": " << what << " has only one of save_state/load_state");
    check_specs(h.options, h.num_options, what, file);
  }
  DDPH_CHECK(desc->num_comms == 0 || desc->comms != nullptr, DDPH_INVALID_ARGUMENT,
             "plugin " << file << ": comms is NULL with num_comms " << desc->num_comms);
  for (size_t i = 0; i < desc->num_comms; ++i) {
    const ddph_comm_factory_t& c =
        entry_at(desc->comms, i, "comms", "ddph_comm_factory_t", DDPH_COMM_FACTORY_SIZE_V1_0, file);
    DDPH_CHECK(c.backend != nullptr && c.create != nullptr, DDPH_INVALID_ARGUMENT,
               "plugin " << file << ": comms[" << i << "] lacks backend or create");
    check_specs(c.options, c.num_options, "comm backend '" + std::string(c.backend) + "'", file);
  }
}

}  // namespace loader
}  // namespace ddph
