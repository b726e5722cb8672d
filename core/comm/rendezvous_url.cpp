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

// A port from the environment variable `name`: a missing or malformed one
// is named. `what` says what the variable is for.
std::string env_port(const std::string& head, const char* name, const char* what) {
  const char* port = std::getenv(name);
  DDPH_CHECK(port != nullptr && *port != '\0', DDPH_INVALID_ARGUMENT,
             head << ": the environment variable " << name << " is "
                  << (port == nullptr ? "not set" : "empty") << " (" << what << ")");
  DDPH_CHECK(parse_port(port) != 0, DDPH_INVALID_ARGUMENT,
             head << ": the environment variable " << name << "='" << port
                  << "' is not a port number in [1, 65535]");
  return port;
}

// env://: MASTER_ADDR and MASTER_PORT, as torchrun, ddph lab and
// init_process_group(init_method="env://") read them. Under torchrun's
// agent store (TORCHELASTIC_USE_AGENT_STORE=True, torchrun's default),
// torchrun itself listens on MASTER_PORT, so rank 0 serves on the port
// after it; DDPH_MASTER_PORT, when set, names the port instead.
RendezvousUrl parse_env(const std::string& head, const std::string& url) {
  DDPH_CHECK(url == kEnvScheme, DDPH_INVALID_ARGUMENT,
             head << ": env:// takes nothing after it (it reads MASTER_ADDR and "
                     "MASTER_PORT)");
  const char* addr = std::getenv("MASTER_ADDR");
  DDPH_CHECK(addr != nullptr && *addr != '\0', DDPH_INVALID_ARGUMENT,
             head << ": the environment variable MASTER_ADDR is "
                  << (addr == nullptr ? "not set" : "empty")
                  << " (rank 0's address: torchrun and ddph lab set it)");
  const std::string addr_text = addr;
  std::string port, from = "MASTER_ADDR=" + addr_text;
  const char* own = std::getenv("DDPH_MASTER_PORT");
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (own != nullptr && *own != '\0') {
    port = env_port(head, "DDPH_MASTER_PORT", "the port rank 0 serves the store on");
    from += " DDPH_MASTER_PORT=" + port;
  } else {
    port = env_port(head, "MASTER_PORT",
                    "the port rank 0 serves the store on: torchrun and ddph lab set it");
    from += " MASTER_PORT=" + port;
    if (agent != nullptr && std::string(agent) == "True") {
      DDPH_CHECK(parse_port(port) != 65535, DDPH_INVALID_ARGUMENT,
                 head << ": torchrun's agent serves MASTER_PORT=65535 itself, and there is no "
                         "port after it for rank 0's store: set DDPH_MASTER_PORT");
      port = std::to_string(parse_port(port) + 1);
      from +=
          " + 1 (torchrun's agent serves MASTER_PORT itself; DDPH_MASTER_PORT names "
          "another port)";
    }
  }
  const bool v6 = addr_text.find(':') != std::string::npos && addr_text[0] != '[';
  const std::string tcp =
      std::string(kTcpScheme) + (v6 ? "[" + addr_text + "]" : addr_text) + ":" + port;
  RendezvousUrl parsed = parse_tcp(head + " (" + tcp + ")", tcp.substr(sizeof kTcpScheme - 1));
  parsed.from_env = from;
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
