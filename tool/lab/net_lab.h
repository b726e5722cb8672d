// A network lab on one machine: local ranks that each have their own network
// card of a chosen rate, for `ddph bench --link`, `ddph train --link` and
// `ddph lab`. Everything stays on loopback addresses inside namespaces this
// process makes, and vanishes with it.
//
// Layout: this process moves into a private network namespace (and a user
// namespace first when not root), the hub, which holds a bridge. Rank r gets
// a network namespace of its own whose only interface, `ddph0`, is one end
// of a veth pair plugged into the bridge, with the address 127.0.0.(r+1)/8.
// So rank r listens on and sends from 127.0.0.(r+1): the kernel has no other
// source address there. Its egress is shaped by an HTB class of the link's
// rate (and netem, for a latency), set up with iproute2's `ip` and `tc`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddph::tool {

// A rate the link takes at_s seconds after the lab started its ranks.
struct LinkChange {
  double at_s = 0;             // > 0
  double rate_bits_per_s = 0;  // > 0
};

struct LinkSpec {
  double rate_bits_per_s = 0;  // > 0; with a schedule, the rate from 0s
  double latency_s = 0;        // one way, added to each rank's egress; 0: none
  std::string text;            // as the user wrote it, for reports
  // `ddph lab` only: the rates after the first, in time order; empty: the
  // rate never changes.
  std::vector<LinkChange> changes;
};

// The most rates one schedule holds (each change forks a `tc` per rank).
constexpr size_t kMaxLinkRates = 64;

// Parses "RATE[,LATENCY]": RATE a number with kbit, mbit or gbit (tc's
// units, decimal), LATENCY with us, ms or s: "1gbit", "10gbit,50us",
// "100mbit,1ms". With `schedule` (ddph lab) it also takes a schedule of
// rates, RATE@TIME pieces from 0s on at increasing times, then optionally a
// latency: "10gbit@0s,100mbit@20s,1gbit@40s", "400mbit@0s,40mbit@1.5s,2ms".
// Throws std::invalid_argument naming --link and the piece that is wrong.
LinkSpec parse_link(const std::string& text, bool schedule = false);

// A rate as tc's units write it, in the largest unit it has at least one
// of: 4e7 -> "40mbit", 1.5e9 -> "1.5gbit".
std::string format_rate(double bits_per_s);

// Seconds to send `bytes` of payload at the link's rate: the wire bound.
double wire_seconds(const LinkSpec& link, double bytes);

class NetLab {
 public:
  static constexpr const char* kInterface = "ddph0";
  static constexpr int kMaxWorld = 254;  // 127.0.0.1 .. 127.0.0.254

  // Builds the lab for `world` ranks. Call it before this process starts
  // any thread (unshare needs that) and before forking the ranks. Throws
  // std::runtime_error with one line saying what is missing (namespaces,
  // `ip`, `tc`, a qdisc) when the lab cannot be made; what was made by then
  // goes when this process exits, since it lives in namespaces only this
  // process holds.
  NetLab(int world, const LinkSpec& link);
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  // In rank r's process, after the fork: joins its namespace and sets
  // DDPH_GLOO_HOSTNAME to its address, GLOO_SOCKET_IFNAME to its interface
  // (PyTorch's Gloo), and MASTER_ADDR to rank 0's address. Returns false
  // (after printing why) if the namespace cannot be joined.
  bool enter(int rank) const;

  // What a rank's command left running in its namespace once it ended
  // (`sleep 600 &`, a daemon, a process that called setsid), found by its
  // network namespace in /proc and killed (SIGKILL, until none is left), so
  // that nothing the lab started outlives the command. One entry per process.
  struct Leftover {
    int rank = 0;
    int pid = 0;
    std::string name;  // its /proc comm
  };
  std::vector<Leftover> kill_leftovers() const;

  // Changes every rank's link to a new rate (its HTB class and burst, as
  // the lab was built with), rank by rank; safe from a thread other than
  // the one that forks the ranks. Throws std::runtime_error naming the
  // rank and tc's own error; the ranks before it have the new rate.
  void change_rate(double bits_per_s) const;

  // The bytes each rank's card has sent so far, headers included: what its
  // port on the hub received (/proc/self/net/dev, read in the hub, where
  // this process lives). -1 for a rank whose count cannot be read.
  std::vector<int64_t> bytes_sent() const;

  static std::string address(int rank);  // "127.0.0.(rank+1)"
  const LinkSpec& link() const { return link_; }

 private:
  void build();
  static std::vector<std::string> htb_class(const char* verb, double bits_per_s);
  // Runs `tool args...` (ip or tc) inside rank r's namespace (r < 0: the
  // hub); throws with the tool's own error line on failure.
  void run(int rank, const std::vector<std::string>& argv) const;

  int world_;
  LinkSpec link_;
  std::vector<int> netns_fds_;  // one per rank, held open so each lives
};

// The exit code of a tool whose lab could not be made (the suite's lab tests
// skip on it).
constexpr int kLabUnavailable = 3;

// The lab for a tool's --link, or NULL after printing "<tool>: <why>" in one
// line.
std::unique_ptr<NetLab> open_lab(const char* tool, int world, const LinkSpec& link);

}  // namespace ddph::tool
