#include "tool/lab/net_lab.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <thread>

namespace ddph::tool {
namespace {

// "1.5gbit" -> 1.5e9; multipliers as tc reads them (decimal). Zero only
// with allow_zero (a schedule's first time), never negative.
bool parse_quantity(const std::string& text, const char* const units[], const double scale[],
                    size_t n, double* out, bool allow_zero = false) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  const std::string unit = text.substr(used);
  for (size_t i = 0; i < n; ++i) {
    if (unit != units[i]) continue;
    *out = v * scale[i];
    return std::isfinite(*out) && (*out > 0 || (allow_zero && *out == 0 && !std::signbit(*out)));
  }
  return false;
}

void write_file(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == ssize_t(text.size());
  const int err = errno;
  if (fd >= 0) ok = close(fd) == 0 && ok;
  if (!ok)
    throw std::runtime_error("cannot write '" + text + "' to " + path + ": " + strerror(err));
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs body in a forked child, inside network namespace fd (or the
// caller's, for -1). body returns "" on success or says what failed; it may
// also exec. Returns the child's complaint (its stderr when it exec'd).
std::string in_child(int netns_fd, const std::function<std::string()>& body) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return std::string("pipe: ") + strerror(errno);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return std::string("fork: ") + strerror(errno);
  if (pid == 0) {
    close(pipe_fds[0]);
    dup2(pipe_fds[1], STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    std::string err;
    if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) != 0)
      err = std::string("setns: ") + strerror(errno);
    if (err.empty()) err = body();
    if (!err.empty()) {
      const ssize_t ignored = write(STDERR_FILENO, err.data(), err.size());
      (void)ignored;
    }
    _exit(err.empty() ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, size_t(n));
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  // The tool's own error is its last non-empty line (tc prints warnings
  // first); keep one line.
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  const size_t nl = out.rfind('\n');
  if (nl != std::string::npos) out = out.substr(nl + 1);
  return out.empty() ? "exit status " + std::to_string(WEXITSTATUS(status)) : out;
}

}  // namespace

namespace {

const char* const kRateUnits[] = {"kbit", "mbit", "gbit"};
const double kRateScale[] = {1e3, 1e6, 1e9};
const char* const kTimeUnits[] = {"us", "ms", "s"};
const double kTimeScale[] = {1e-6, 1e-3, 1.0};
constexpr double kMinRate = 8e3, kMaxRate = 4e11;  // what HTB takes
constexpr double kMaxTime = 1e6;                   // --timeout's limit

const char kRateRule[] = "is a number with kbit, mbit or gbit, from 8kbit to 400gbit";

bool parse_rate(const std::string& text, double* out) {
  return parse_quantity(text, kRateUnits, kRateScale, 3, out) && *out >= kMinRate &&
         *out <= kMaxRate;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// A schedule: "RATE@TIME,RATE@TIME,...[,LATENCY]", split at its commas.
void parse_schedule(const std::string& text, const std::vector<std::string>& written,
                    LinkSpec* link) {
  std::vector<std::string> pieces;
  for (const std::string& p : written) pieces.push_back(lowercase(p));
  auto bad = [&](size_t i, const std::string& why) {
    return std::invalid_argument("--link '" + text + "': piece " + std::to_string(i + 1) + " '" +
                                 written[i] + "': " + why);
  };
  const std::string no_time =
      "no @TIME (every rate of a schedule says when it starts, e.g. 100mbit@20s; a latency "
      "comes last)";
  size_t rates = pieces.size();
  double ignored = 0;
  if (pieces.back().find('@') == std::string::npos) {
    --rates;  // the last piece is the latency
    if (parse_rate(pieces.back(), &ignored)) throw bad(rates, no_time);
    if (!parse_quantity(pieces.back(), kTimeUnits, kTimeScale, 3, &link->latency_s) ||
        link->latency_s > 10)
      throw bad(rates, "neither RATE@TIME nor a latency (a number with us, ms or s, at most 10s)");
  }
  if (rates > kMaxLinkRates)
    throw std::invalid_argument("--link '" + text + "': " + std::to_string(rates) +
                                " rates; a schedule has at most " + std::to_string(kMaxLinkRates));
  for (size_t i = 0; i < rates; ++i) {
    const size_t at = pieces[i].find('@');
    if (at == std::string::npos) throw bad(i, no_time);
    double rate = 0, time = 0;
    if (!parse_rate(pieces[i].substr(0, at), &rate))
      throw bad(i, std::string("the rate before @ ") + kRateRule);
    if (!parse_quantity(pieces[i].substr(at + 1), kTimeUnits, kTimeScale, 3, &time, true) ||
        time > kMaxTime)
      throw bad(i, "the time after @ is a number with us, ms or s, from 0s to 1e6s (e.g. 20s)");
    if (i == 0 && time != 0) throw bad(i, "the first rate starts at 0s (e.g. 10gbit@0s)");
    if (i > 0 && time <= (i == 1 ? 0 : link->changes.back().at_s))
      throw bad(i, "not after piece " + std::to_string(i) + "'s time (times increase)");
    if (i == 0)
      link->rate_bits_per_s = rate;
    else
      link->changes.push_back({time, rate});
  }
}

}  // namespace

LinkSpec parse_link(const std::string& text, bool schedule) {
  LinkSpec link;
  link.text = text;
  const std::string lower = lowercase(text);
  if (lower.find('@') != std::string::npos) {
    if (!schedule)
      throw std::invalid_argument("--link '" + text +
                                  "': a schedule of rates (RATE@TIME) is for ddph lab; this "
                                  "command takes one RATE[,LATENCY]");
    std::vector<std::string> pieces;  // as written, for the errors
    for (size_t from = 0;;) {
      const size_t comma = text.find(',', from);
      pieces.push_back(text.substr(from, comma - from));
      if (pieces.back().empty())
        throw std::invalid_argument("--link '" + text + "': piece " +
                                    std::to_string(pieces.size()) + " is empty");
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
    parse_schedule(text, pieces, &link);
    return link;
  }
  const size_t comma = lower.find(',');
  const std::string rate = lower.substr(0, comma);
  if (!parse_rate(rate, &link.rate_bits_per_s))
    throw std::invalid_argument("--link '" + text + "': the rate " + kRateRule +
                                " (e.g. 1gbit, 100mbit)");
  if (comma != std::string::npos) {
    const std::string latency = lower.substr(comma + 1);
    if (!parse_quantity(latency, kTimeUnits, kTimeScale, 3, &link.latency_s) || link.latency_s > 10)
      throw std::invalid_argument("--link '" + text +
                                  "': the latency after the comma is a number with us, ms or s, "
                                  "at most 10s (e.g. 1gbit,50us)");
  }
  return link;
}

std::string format_rate(double bits_per_s) {
  size_t u = 0;
  while (u + 1 < 3 && bits_per_s >= kRateScale[u + 1]) ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.10g%s", bits_per_s / kRateScale[u], kRateUnits[u]);
  return buf;
}

double wire_seconds(const LinkSpec& link, double bytes) {
  return bytes * 8.0 / link.rate_bits_per_s;
}

std::string NetLab::address(int rank) {
  return "127.0.0." + std::to_string(rank + 1);
}

NetLab::NetLab(int world, const LinkSpec& link) : world_(world), link_(link) {
  if (world < 1 || world > kMaxWorld)
    throw std::invalid_argument("--link runs at most " + std::to_string(kMaxWorld) +
                                " ranks (one loopback address each), not " + std::to_string(world));
  const std::string why = "cannot make the network lab for --link: ";
  if (geteuid() != 0) {
    // A user namespace in which this process is root, so that it may make
    // network namespaces where the kernel lets unprivileged users do so.
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER) != 0)
      throw std::runtime_error(why + "unshare(CLONE_NEWUSER): " + strerror(errno) +
                               " (run as root, or allow unprivileged user namespaces)");
    try {
      write_file("/proc/self/setgroups", "deny");
      write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
      write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
    } catch (const std::exception& e) {
      throw std::runtime_error(why + e.what());
    }
  }
  if (unshare(CLONE_NEWNET) != 0)
    throw std::runtime_error(why + "unshare(CLONE_NEWNET): " + strerror(errno) +
                             " (run as root, or allow unprivileged user namespaces)");
  try {
    build();
  } catch (const std::exception& e) {
    throw std::runtime_error(why + e.what());
  }
}

NetLab::~NetLab() {
  for (int fd : netns_fds_) close(fd);
}

void NetLab::run(int rank, const std::vector<std::string>& argv) const {
  const int fd = rank < 0 ? -1 : netns_fds_[size_t(rank)];
  const std::string err = in_child(fd, [&]() -> std::string {
    // iproute2 installs into /usr/sbin and /sbin, often not on a user's PATH.
    const char* path = std::getenv("PATH");
    const std::string full =
        std::string(path != nullptr ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin";
    setenv("PATH", full.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    return "'" + argv[0] + "' not found (" + strerror(errno) + "; apt-get install -y iproute2)";
  });
  if (!err.empty()) throw std::runtime_error("`" + join(argv) + "` failed: " + err);
}

// `tc class VERB` of a rank's one HTB class, 1:1, at a rate.
std::vector<std::string> NetLab::htb_class(const char* verb, double bits_per_s) {
  // HTB sends a burst at once and then waits: 2 ms of the rate (at least
  // 64 KiB) lets TCP keep the link full (a raw stream then reaches the
  // rate less the 66 bytes of headers per 1500-byte packet).
  const std::string burst = std::to_string(int64_t(std::max(65536.0, bits_per_s / 8.0 * 2e-3)));
  const std::string rate = std::to_string(int64_t(std::llround(bits_per_s))) + "bit";
  return {
      "tc", "class", verb, "dev",   kInterface, "parent", "1:",  "classid", "1:1",  "htb", "rate",
      rate, "ceil",  rate, "burst", burst,      "cburst", burst, "quantum", "60000"};
}

void NetLab::change_rate(double bits_per_s) const {
  for (int r = 0; r < world_; ++r) {
    try {
      run(r, htb_class("change", bits_per_s));
    } catch (const std::exception& e) {
      throw std::runtime_error("rank " + std::to_string(r) + ": " + e.what());
    }
  }
}

void NetLab::build() {
  // The hub is where this process now is; each rank's namespace is made
  // here, kept by its descriptor, and left again for the hub.
  const int hub = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (hub < 0) throw std::runtime_error(std::string("open /proc/self/ns/net: ") + strerror(errno));
  for (int r = 0; r < world_; ++r) {
    if (unshare(CLONE_NEWNET) != 0) {
      close(hub);
      throw std::runtime_error(std::string("unshare(CLONE_NEWNET): ") + strerror(errno));
    }
    const int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      close(hub);
      throw std::runtime_error(std::string("open /proc/self/ns/net: ") + strerror(errno));
    }
    netns_fds_.push_back(fd);
  }
  const bool back = setns(hub, CLONE_NEWNET) == 0;
  close(hub);
  if (!back) throw std::runtime_error(std::string("setns back to the hub: ") + strerror(errno));

  const std::string hub_path = "/proc/" + std::to_string(getpid()) + "/ns/net";
  run(-1, {"ip", "link", "set", "lo", "up"});
  run(-1, {"ip", "link", "add", "ddph-hub", "type", "bridge"});
  run(-1, {"ip", "link", "set", "ddph-hub", "up"});
  for (int r = 0; r < world_; ++r) {
    const std::string port = "ddph-r" + std::to_string(r);
    run(r, {"ip", "link", "set", "lo", "up"});
    // Loopback keeps ::1 but gives up 127.0.0.0/8, which now leads out of
    // the card; route_localnet lets 127/8 cross it.
    run(r, {"ip", "addr", "del", "127.0.0.1/8", "dev", "lo"});
    run(r,
        {"ip", "link", "add", kInterface, "type", "veth", "peer", "name", port, "netns", hub_path});
    const std::string err = in_child(netns_fds_[size_t(r)], [] {
      try {
        write_file("/proc/sys/net/ipv4/conf/all/route_localnet", "1");
        write_file(std::string("/proc/sys/net/ipv4/conf/") + kInterface + "/route_localnet", "1");
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string();
    });
    if (!err.empty()) throw std::runtime_error(err);
    run(r, {"ip", "addr", "add", address(r) + "/8", "dev", kInterface});
    run(r, {"ip", "link", "set", kInterface, "up"});
    run(r,
        {"tc", "qdisc", "add", "dev", kInterface, "root", "handle", "1:", "htb", "default", "1"});
    run(r, htb_class("add", link_.rate_bits_per_s));
    if (link_.latency_s > 0) {
      const std::string delay = std::to_string(int64_t(std::llround(link_.latency_s * 1e6))) + "us";
      try {
        run(r, {"tc", "qdisc", "add", "dev", kInterface, "parent", "1:1", "handle", "10:", "netem",
                "delay", delay, "limit", "100000"});
      } catch (const std::exception& e) {
        throw std::runtime_error(std::string("a latency needs the netem qdisc (kernel module "
                                             "sch_netem); ") +
                                 e.what());
      }
    }
    run(-1, {"ip", "link", "set", port, "master", "ddph-hub"});
    run(-1, {"ip", "link", "set", port, "up"});
  }
}

std::unique_ptr<NetLab> open_lab(const char* tool, int world, const LinkSpec& link) {
  try {
    return std::unique_ptr<NetLab>(new NetLab(world, link));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return nullptr;
  }
}

std::vector<NetLab::Leftover> NetLab::kill_leftovers() const {
  // A process is in rank r's namespace when its /proc/PID/ns/net is the
  // namespace this lab holds open for r (same device and inode).
  std::vector<std::pair<dev_t, ino_t>> ns;
  for (int fd : netns_fds_) {
    struct stat st {};
    if (fstat(fd, &st) != 0) st.st_dev = st.st_ino = 0;
    ns.emplace_back(st.st_dev, st.st_ino);
  }
  std::vector<Leftover> killed;
  std::set<int> seen;
  // Rounds until one finds nothing: a leftover may fork while it is killed.
  // A process that has exited (a zombie) has no namespace link any more.
  for (int round = 0; round < 100; ++round) {
    bool found = false;
    DIR* proc = opendir("/proc");
    if (proc == nullptr) break;
    while (dirent* e = readdir(proc)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0 || pid == getpid()) continue;
      struct stat st {};
      if (stat(("/proc/" + std::string(e->d_name) + "/ns/net").c_str(), &st) != 0) continue;
      const auto it = std::find(ns.begin(), ns.end(), std::make_pair(st.st_dev, st.st_ino));
      if (it == ns.end()) continue;
      found = true;
      if (seen.insert(int(pid)).second) {
        Leftover l;
        l.rank = int(it - ns.begin());
        l.pid = int(pid);
        std::ifstream comm("/proc/" + std::string(e->d_name) + "/comm");
        std::getline(comm, l.name);
        killed.push_back(l);
      }
      kill(pid_t(pid), SIGKILL);
    }
    closedir(proc);
    if (!found) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return killed;
}

std::vector<int64_t> NetLab::bytes_sent() const {
  std::vector<int64_t> sent(size_t(world_), -1);
  // /proc/self/net/dev: two header lines, then "  NAME: rx_bytes rx_packets ...".
  std::ifstream dev("/proc/self/net/dev");
  for (std::string line; std::getline(dev, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t first = line.find_first_not_of(' ');
    const std::string name = line.substr(first, colon - first);
    if (name.rfind("ddph-r", 0) != 0) continue;
    char* end = nullptr;
    const long r = std::strtol(name.c_str() + 6, &end, 10);
    if (*end != '\0' || r < 0 || r >= world_) continue;
    const long long rx = std::strtoll(line.c_str() + colon + 1, &end, 10);
    if (end != line.c_str() + colon + 1) sent[size_t(r)] = rx;
  }
  return sent;
}

bool NetLab::enter(int rank) const {
  if (setns(netns_fds_[size_t(rank)], CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "ddph: rank %d cannot join its lab namespace: %s\n", rank,
                 strerror(errno));
    return false;
  }
  unsetenv("DDPH_GLOO_IFACE");  // it would win over the address
  setenv("DDPH_GLOO_HOSTNAME", address(rank).c_str(), 1);
  setenv("GLOO_SOCKET_IFNAME", kInterface, 1);
  setenv("MASTER_ADDR", address(0).c_str(), 1);
  return true;
}

}  // namespace ddph::tool
