#include "core/base/host.h"

#include <atomic>

namespace ddph {
namespace {
std::atomic<const ddph_host_t*> g_host{nullptr};
}

bool set_host(const ddph_host_t* h) {
  if (h == nullptr || h->struct_size < DDPH_HOST_SIZE_V1_0 || h->abi_major != DDPH_ABI_MAJOR)
    return false;
  g_host.store(h);
  return true;
}

const ddph_host_t* host() { return g_host.load(); }

void log(ddph_log_level_t level, const char* family, const std::string& message) {
  const ddph_host_t* h = host();
  if (h != nullptr && h->log != nullptr) h->log(level, family, message.c_str());
}

}  // namespace ddph
