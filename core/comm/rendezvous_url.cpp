#include "core/comm/rendezvous_url.h"

#include <cstdlib>

#include "core/base/error.h"

namespace ddph {
namespace {

constexpr const char kFileScheme[] = "file://";
constexpr const char kRedisScheme[] = "redis://";
constexpr const char kTcpScheme[] = "tcp://";
constexpr const char kEnvScheme[] = "env://";
constexpr int kDefaultRedisPort = 6379;
constexpr const char kExpected[] =
    "expected file:///abs/dir, redis://host:port, tcp://host:port or env://";

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// A port in [1, 65535], or 0.
int parse_port(const std::string& text) {
  if (text.empty() || text.size() > 5) return 0;
  char* end = nullptr;
  const long p = std::strtol(text.c_str(), &end, 10);
  return *end == '\0' && text[0] != '-' && text[0] != '+' && p >= 1 && p <= 65535 ? int(p) : 0;
}

// "host", "host:port", "[v6]" or "[v6]:port" into host and port text.
void split_host_port(const std::string& head, const std::string& rest, std::string* host,
                     std::string* port, bool* has_port) {
  *has_port = false;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    DDPH_CHECK(close != std::string::npos, DDPH_INVALID_ARGUMENT,
               head << ": '[' without ']' around an IPv6 address");
    *host = rest.substr(1, close - 1);
    const std::string after = rest.substr(close + 1);
    DDPH_CHECK(after.empty() || after[0] == ':', DDPH_INVALID_ARGUMENT,
               head << ": '" << after << "' after the IPv6 address");
    if (!after.empty()) {
      *port = after.substr(1);
      *has_port = true;
    }
    return;
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    *host = rest;
    return;
  }
  DDPH_CHECK(rest.find(':') == colon, DDPH_INVALID_ARGUMENT,
             head << ": write an IPv6 address in brackets ([::1]:port)");
  *host = rest.substr(0, colon);
  *port = rest.substr(colon + 1);
  *has_port = true;
}

RendezvousUrl parse_tcp(const std::string& head, const std::string& rest) {
  RendezvousUrl parsed{RendezvousUrl::kTcp, "", "", 0, ""};
  std::string tail = rest, port;
  if (!tail.empty() && tail.back() == '/') tail.pop_back();
  bool has_port = false;
  split_host_port(head, tail, &parsed.host, &port, &has_port);
  DDPH_CHECK(!parsed.host.empty(), DDPH_INVALID_ARGUMENT,
             head << ": no host (expected tcp://HOST:PORT)");
  DDPH_CHECK(has_port, DDPH_INVALID_ARGUMENT,
             head << ": no port (expected tcp://HOST:PORT; rank 0 serves the "
                     "store on that port)");
  parsed.port = parse_port(port);
  DDPH_CHECK(parsed.port != 0, DDPH_INVALID_ARGUMENT,
             head << ": port '" << port << "' is not a number in [1, 65535]");
  return parsed;
}

// env://: MASTER_ADDR and MASTER_PORT, as torchrun, ddph lab and
// init_process_group(init_method="env://") read them.
RendezvousUrl parse_env(const std::string& head, const std::string& url) {
  DDPH_CHECK(url == kEnvScheme, DDPH_INVALID_ARGUMENT,
             head << ": env:// takes nothing after it (it reads MASTER_ADDR and "
                     "MASTER_PORT)");
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  DDPH_CHECK(addr != nullptr && *addr != '\0', DDPH_INVALID_ARGUMENT,
             head << ": the environment variable MASTER_ADDR is "
                  << (addr == nullptr ? "not set" : "empty")
                  << " (rank 0's address: torchrun and ddph lab set it)");
  DDPH_CHECK(port != nullptr && *port != '\0', DDPH_INVALID_ARGUMENT,
             head << ": the environment variable MASTER_PORT is "
                  << (port == nullptr ? "not set" : "empty")
                  << " (the port rank 0 serves the store on: torchrun and ddph lab set it)");
  DDPH_CHECK(parse_port(port) != 0, DDPH_INVALID_ARGUMENT,
             head << ": the environment variable MASTER_PORT='" << port
                  << "' is not a port number in [1, 65535]");
  const std::string addr_text = addr;
  const bool v6 = addr_text.find(':') != std::string::npos && addr_text[0] != '[';
  const std::string tcp =
      std::string(kTcpScheme) + (v6 ? "[" + addr_text + "]" : addr_text) + ":" + port;
  RendezvousUrl parsed = parse_tcp(head + " (" + tcp + ")", tcp.substr(sizeof kTcpScheme - 1));
  parsed.from_env = "MASTER_ADDR=" + addr_text + " MASTER_PORT=" + port;
  return parsed;
}

}  // namespace

bool is_rendezvous_url(const std::string& url) {
  for (const char* scheme : {kFileScheme, kRedisScheme, kTcpScheme, kEnvScheme})
    if (starts_with(url, scheme)) return true;
  return false;
}

RendezvousUrl parse_rendezvous_url(const std::string& url, const std::string& source) {
  const std::string head = (source.empty() ? "" : source + " ") + "'" + url + "'";
  RendezvousUrl parsed{RendezvousUrl::kFile, "", "", 0, ""};
  if (starts_with(url, kFileScheme)) {
    parsed.dir = url.substr(sizeof kFileScheme - 1);
    DDPH_CHECK(!parsed.dir.empty() && parsed.dir[0] == '/', DDPH_INVALID_ARGUMENT,
               head << ": a file store needs an absolute path (file:///abs/dir)");
    return parsed;
  }
  if (starts_with(url, kTcpScheme)) return parse_tcp(head, url.substr(sizeof kTcpScheme - 1));
  if (starts_with(url, kEnvScheme)) return parse_env(head, url);
  DDPH_CHECK(starts_with(url, kRedisScheme), DDPH_INVALID_ARGUMENT,
             head << " is not a supported URL (" << kExpected << ")");
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
    DDPH_CHECK(!port.empty() && *end == '\0' && p >= 1 && p <= 65535, DDPH_INVALID_ARGUMENT,
               head << ": port '" << port << "' is not a number in [1, 65535]");
    parsed.port = int(p);
  }
  DDPH_CHECK(!parsed.host.empty(), DDPH_INVALID_ARGUMENT,
             head << ": no host (expected redis://HOST:PORT)");
  return parsed;
}

}  // namespace ddph
