// `ddph lab`: runs any command once per rank in the network lab that
// `ddph bench --link` uses (tool/lab/net_lab.h), so that other programs,
// PyTorch's own DDP hooks among them, are measured on the same links.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/json_line.h"
#include "tool/lab/link_schedule.h"
#include "tool/lab/net_lab.h"
#include "tool/ranks/launchers.h"

namespace ddph::tool {
namespace {

const char kDescription[] =
    "Runs COMMAND once per rank (default 2 ranks), each in its own network\n"
    "namespace with one card of RATE (e.g. 1gbit, 100mbit; LATENCY e.g. 50us\n"
    "needs the kernel's netem), rank r at 127.0.0.(r+1). A schedule of rates,\n"
    "RATE@TIME pieces from 0s on (e.g. 10gbit@0s,100mbit@20s,1gbit@40s), changes\n"
    "every rank's rate at those times from the ranks' start, one line each.\n"
    "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR\n"
    "(127.0.0.1), MASTER_PORT (default 29500), GLOO_SOCKET_IFNAME (ddph0) and\n"
    "DDPH_GLOO_HOSTNAME, as torchrun and ddphooks read them, and DDPH_LAB_LINK\n"
    "(the --link text) and DDPH_LAB_START_MONOTONIC (the schedule's 0s on\n"
    "CLOCK_MONOTONIC, Python's time.monotonic()). Needs root, or\n"
    "unprivileged user namespaces, and iproute2. Exits 0 when every rank did;\n"
    "ranks still running past the timeout are killed. Once all have ended, one\n"
    "line per rank: its exit, wall time and the bytes its card sent (--json: one\n"
    "object with each rank's).\n"
    "Example: ddph lab --link 1gbit --world 2 -- python3 train.py";

struct LabOptions {
  std::string link;
  int world = 2;
  int port = 29500;
  double timeout_s = 3600;
  std::vector<std::string> command;
  bool json = false;
};

// sent[r]: the bytes rank r's card sent while its command ran; -1: unknown.
Json exits_json(const std::vector<RankExit>& exits, const std::vector<int64_t>& sent) {
  Json out = Json::array();
  for (const RankExit& e : exits)
    out.push_back(
        {{"rank", e.rank},
         {"ok", e.ok()},
         {"exit", e.exited ? Json(e.code) : Json(nullptr)},
         {"signal", e.signal},
         {"killed", e.killed},
         {"seconds", e.seconds},
         {"bytes_sent", sent[size_t(e.rank)] >= 0 ? Json(sent[size_t(e.rank)]) : Json(nullptr)}});
  return out;
}

// One line per rank on stdout once all have ended, so that a run whose
// command prints nothing still shows what ran: "ddph lab: rank 1: exit 0,
// 2.03 s, sent 238.42 MiB on its 1gbit link".
void print_summary(const std::vector<RankExit>& exits, const std::vector<int64_t>& sent,
                   const LinkSpec& link) {
  for (const RankExit& e : exits) {
    std::string status = e.exited ? "exit " + std::to_string(e.code)
                                  : std::string("ended by signal ") + strsignal(e.signal);
    if (e.killed) status += " (killed by ddph)";
    const int64_t bytes = sent[size_t(e.rank)];
    const std::string what =
        bytes >= 0 ? "sent " + format_mib(double(bytes)) + " on its " + link.text + " link"
                   : "bytes sent unknown";
    std::printf("ddph lab: rank %d: %s, %.2f s, %s\n", e.rank, status.c_str(), e.seconds,
                what.c_str());
  }
  std::fflush(stdout);
}

// A change of the link's rate as the lab makes it, one line: on stdout
// beside the ranks' output ("ddph lab: at 1.50 s, every rank's link is now
// 40mbit"), or on stderr under --json, whose stdout is the ranks' and one
// JSON object. A change that failed is on stderr, and fails the lab: the
// ranks ran on a link other than the one asked for.
void print_change(const LinkScheduler::Made& m, bool json) {
  const std::string rate = format_rate(m.rate_bits_per_s);
  if (!m.error.empty()) {
    std::fprintf(stderr,
                 "ddph lab: at %.2f s, the link could not change to %s, and keeps its rate "
                 "from then on: %s\n",
                 m.at_s, rate.c_str(), m.error.c_str());
    std::fflush(stderr);
    return;
  }
  std::FILE* to = json ? stderr : stdout;
  std::fprintf(to, "ddph lab: at %.2f s, every rank's link is now %s\n", m.at_s, rate.c_str());
  std::fflush(to);
}

Json changes_json(const std::vector<LinkScheduler::Made>& changes) {
  Json out = Json::array();
  for (const LinkScheduler::Made& m : changes) {
    Json c = {{"at_s", m.at_s},
              {"rate", format_rate(m.rate_bits_per_s)},
              {"bits_per_s", m.rate_bits_per_s},
              {"ok", m.error.empty()}};
    if (!m.error.empty()) c["error"] = m.error;
    out.push_back(c);
  }
  return out;
}

int run_lab(LabOptions& o) {
  LinkSpec link;
  try {
    // Checked here rather than by CLI11, so that a misspelt flag is named first.
    if (o.link.empty()) throw std::invalid_argument("--link is required");
    if (o.command.empty()) throw std::invalid_argument("no command after --");
    link = parse_link(o.link, /*schedule=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph lab: %s\n", e.what());
    return kExitUsage;
  }
  const std::unique_ptr<NetLab> lab = open_lab("ddph lab", o.world, link);
  if (!lab) return kLabUnavailable;
  const std::vector<int64_t> sent_before = lab->bytes_sent();
  // The schedule's 0s: just before the first rank is forked. The ranks get
  // it on CLOCK_MONOTONIC, which steady_clock reads, to time their phases.
  const auto start = LinkScheduler::Clock::now();
  const std::string start_text =
      std::to_string(std::chrono::duration<double>(start.time_since_epoch()).count());
  std::unique_ptr<LinkScheduler> schedule;
  if (!link.changes.empty())
    schedule.reset(new LinkScheduler(
        *lab, start, [&](const LinkScheduler::Made& m) { print_change(m, o.json); }));
  std::vector<RankExit> exits = run_local_ranks(
      o.world,
      [&](int r) {
        if (!lab->enter(r)) return 1;
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(o.world).c_str(), 1);
        setenv("LOCAL_WORLD_SIZE", std::to_string(o.world).c_str(), 1);
        setenv("MASTER_PORT", std::to_string(o.port).c_str(), 1);
        setenv("DDPH_LAB_LINK", link.text.c_str(), 1);
        setenv("DDPH_LAB_START_MONOTONIC", start_text.c_str(), 1);
        std::vector<char*> args;
        for (std::string& a : o.command) args.push_back(&a[0]);
        args.push_back(nullptr);
        execvp(args[0], args.data());
        std::fprintf(stderr, "ddph lab: rank %d: cannot run %s: %s\n", r, args[0],
                     std::strerror(errno));
        return 127;
      },
      o.timeout_s, 10.0);
  // Ranks that ended before a change was due: it is not made.
  const std::vector<LinkScheduler::Made> changes =
      schedule ? schedule->stop() : std::vector<LinkScheduler::Made>();
  bool changes_ok = true;
  for (const LinkScheduler::Made& m : changes) changes_ok = changes_ok && m.error.empty();
  std::vector<int64_t> sent = lab->bytes_sent();
  for (size_t r = 0; r < sent.size(); ++r)
    sent[r] = sent[r] >= 0 && sent_before[r] >= 0 ? sent[r] - sent_before[r] : -1;
  // Nothing the lab started outlives it: what the ranks' commands left
  // running in their namespaces is killed, and named.
  std::vector<std::string> left(size_t(o.world));
  for (const NetLab::Leftover& l : lab->kill_leftovers())
    left[size_t(l.rank)] += (left[size_t(l.rank)].empty() ? "" : ", ") + std::to_string(l.pid) +
                            " (" + (l.name.empty() ? "?" : l.name) + ")";
  for (int r = 0; r < o.world; ++r)
    if (!left[size_t(r)].empty())
      std::fprintf(stderr,
                   "ddph lab: rank %d's command left processes running in its namespace, "
                   "killed: pid %s\n",
                   r, left[size_t(r)].c_str());
  end_if_stopped("ddph lab");
  const bool all_ok = report_ranks("ddph lab", exits) && changes_ok;
  if (o.json) {
    Json out = {{"link", link.text},
                {"world", o.world},
                {"ok", all_ok},
                {"ranks", exits_json(exits, sent)}};
    if (!link.changes.empty()) out["link_changes"] = changes_json(changes);
    print_json_line(out);
  } else {
    print_summary(exits, sent, link);
  }
  return all_ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_lab_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<LabOptions>();
  CLI::App* cmd =
      add_command(root, "lab", "run a command per rank, each on its own shaped network link",
                  kDescription, o, run_lab, exit_code);
  cmd->add_option("--link", o->link,
                  "each rank's link: RATE[,LATENCY], e.g. 1gbit,50us, or a schedule of "
                  "RATE@TIME pieces, e.g. 10gbit@0s,100mbit@20s")
      ->type_name("RATE[,LATENCY]|RATE@0s,RATE@TIME...[,LATENCY]")
      ->check(non_empty());
  add_whole(cmd, "--world", &o->world, "ranks", "N", 1, NetLab::kMaxWorld);
  add_whole(cmd, "--port", &o->port, "MASTER_PORT", "PORT", 1024, 65535);
  add_real(cmd, "--timeout", &o->timeout_s, "seconds before running ranks are killed", "SECONDS",
           1.0, 1e6);
  cmd->add_option("command", o->command, "the command each rank runs, after --")
      ->type_name("COMMAND [ARGS...]");
}

}  // namespace ddph::tool
