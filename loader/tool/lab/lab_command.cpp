// `ddph lab`: runs any command once per rank in the network lab that
// `ddph bench --link` uses (loader/tool/lab/net_lab.h), so that other programs,
// PyTorch's own DDP hooks among them, are measured on the same links.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/tool/cli.h"
#include "loader/tool/commands.h"
#include "loader/tool/json_line.h"
#include "loader/tool/lab/net_lab.h"
#include "loader/tool/ranks/launchers.h"

namespace ddph::tool {
namespace {

const char kDescription[] =
    "Runs COMMAND once per rank (default 2 ranks), each in its own network\n"
    "namespace with one card of RATE (e.g. 1gbit, 100mbit; LATENCY e.g. 50us\n"
    "needs the kernel's netem), rank r at 127.0.0.(r+1). Each rank gets RANK,\n"
    "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1),\n"
    "MASTER_PORT (default 29500), GLOO_SOCKET_IFNAME (ddph0) and\n"
    "DDPH_GLOO_HOSTNAME, as torchrun and ddphooks read them. Needs root, or\n"
    "unprivileged user namespaces, and iproute2. Exits 0 when every rank did;\n"
    "ranks still running past the timeout are killed. --json: after the ranks,\n"
    "one object with each rank's exit.\n"
    "Example: ddph lab --link 1gbit --world 2 -- python3 train.py";

struct LabOptions {
  std::string link;
  int world = 2;
  int port = 29500;
  double timeout_s = 3600;
  std::vector<std::string> command;
  bool json = false;
};

Json exits_json(const std::vector<RankExit>& exits) {
  Json out = Json::array();
  for (const RankExit& e : exits)
    out.push_back({{"rank", e.rank},
                   {"ok", e.ok()},
                   {"exit", e.exited ? Json(e.code) : Json(nullptr)},
                   {"signal", e.signal},
                   {"killed", e.killed}});
  return out;
}

int run_lab(LabOptions& o) {
  LinkSpec link;
  try {
    // Checked here rather than by CLI11, so that a misspelt flag is named first.
    if (o.link.empty()) throw std::invalid_argument("--link is required");
    if (o.command.empty()) throw std::invalid_argument("no command after --");
    link = parse_link(o.link);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph lab: %s\n", e.what());
    return kExitUsage;
  }
  const std::unique_ptr<NetLab> lab = open_lab("ddph lab", o.world, link);
  if (!lab) return kLabUnavailable;
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
        std::vector<char*> args;
        for (std::string& a : o.command) args.push_back(&a[0]);
        args.push_back(nullptr);
        execvp(args[0], args.data());
        std::fprintf(stderr, "ddph lab: rank %d: cannot run %s: %s\n", r, args[0],
                     std::strerror(errno));
        return 127;
      },
      o.timeout_s, 10.0);
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
  const bool all_ok = report_ranks("ddph lab", exits);
  if (o.json)
    print_json_line(
        {{"link", link.text}, {"world", o.world}, {"ok", all_ok}, {"ranks", exits_json(exits)}});
  return all_ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_lab_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<LabOptions>();
  CLI::App* cmd = add_command(
      root, "lab", "run a command per rank, each on its own shaped network link", &o->json);
  cmd->footer(kDescription);
  cmd->add_option("--link", o->link, "each rank's link: RATE[,LATENCY], e.g. 1gbit,50us")
      ->type_name("RATE[,LATENCY]")
      ->check(non_empty());
  cmd->add_option("--world", o->world, "ranks")
      ->type_name("N")
      ->check(whole_in(1, NetLab::kMaxWorld))
      ->capture_default_str();
  cmd->add_option("--port", o->port, "MASTER_PORT")
      ->type_name("PORT")
      ->check(whole_in(1024, 65535))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "seconds before running ranks are killed")
      ->type_name("SECONDS")
      ->check(real_in(1.0, 1e6))
      ->capture_default_str();
  cmd->add_option("command", o->command, "the command each rank runs, after --")
      ->type_name("COMMAND [ARGS...]");
  cmd->callback([o, exit_code] { *exit_code = run_lab(*o); });
}

}  // namespace ddph::tool
