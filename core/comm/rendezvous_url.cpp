#include "core/comm/rendezvous_url.h"

#include <cstdlib>

#include "core/base/error.h"

namespace ddph {
namespace {

constexpr const char kFileScheme[] = "file://";
constexpr const char kRedisScheme[] = "redis://";
constexpr int kDefaultRedisPort = 6379;

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

RendezvousUrl parse_rendezvous_url(const std::string& url) {
  RendezvousUrl parsed{RendezvousUrl::kFile, "", "", 0};
  if (starts_with(url, kFileScheme)) {
    parsed.dir = url.substr(sizeof kFileScheme - 1);
    DDPH_CHECK(
        !parsed.dir.empty() && parsed.dir[0] == '/', DDPH_INVALID_ARGUMENT,
        "init.rendezvous '" << url << "': a file store needs an absolute path (file:///abs/dir)");
    return parsed;
  }
  DDPH_CHECK(starts_with(url, kRedisScheme), DDPH_INVALID_ARGUMENT,
             "init.rendezvous '" << url
                                 << "' is not a supported URL (expected file:///abs/dir or "
                                    "redis://host:port)");
  parsed.kind = RendezvousUrl::kRedis;
  std::string rest = url.substr(sizeof kRedisScheme - 1);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  parsed.host = rest;
  parsed.port = kDefaultRedisPort;
  size_t colon = rest.rfind(':');
  if (colon != std::string::npos) {
    parsed.host = rest.substr(0, colon);
    std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    DDPH_CHECK(
        !port.empty() && *end == '\0' && p >= 1 && p <= 65535, DDPH_INVALID_ARGUMENT,
        "init.rendezvous '" << url << "': port '" << port << "' is not a number in [1, 65535]");
    parsed.port = int(p);
  }
  DDPH_CHECK(!parsed.host.empty(), DDPH_INVALID_ARGUMENT,
             "init.rendezvous '" << url << "': no host (expected redis://HOST:PORT)");
  return parsed;
}

}  // namespace ddph
