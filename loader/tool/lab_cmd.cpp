// `ddph lab`: runs any command once per rank in the network lab that
// `ddph bench --link` uses (loader/tool/net_lab.h), so that other programs,
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

#include "loader/tool/commands.h"
#include "loader/tool/net_lab.h"
#include "loader/tool/train_flags.h"
#include "loader/tool/train_launch.h"

namespace ddph_tool {
namespace {

const char kUsage[] =
    "usage: ddph lab --link RATE[,LATENCY] [--world N] [--port P] [--timeout SECONDS]\n"
    "                -- COMMAND [ARGS...]\n"
    "Runs COMMAND once per rank (default 2 ranks), each in its own network\n"
    "namespace with one card of RATE (e.g. 1gbit, 100mbit; LATENCY e.g. 50us\n"
    "needs the kernel's netem), rank r at 127.0.0.(r+1). Each rank gets RANK,\n"
    "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1),\n"
    "MASTER_PORT (default 29500), GLOO_SOCKET_IFNAME (ddph0) and\n"
    "DDPH_GLOO_HOSTNAME, as torchrun and ddphooks read them. Needs root, or\n"
    "unprivileged user namespaces, and iproute2. Exits 0 when every rank did;\n"
    "ranks still running past the timeout (default 3600) are killed.\n";

struct LabOptions {
  std::string link;
  int world = 2;
  int port = 29500;
  double timeout_s = 3600;
  std::vector<std::string> command;
  bool help = false;
};

LabOptions parse(int argc, char** argv) {
  LabOptions o;
  int flags_end = argc;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      flags_end = i;
      break;
    }
  Flags f(flags_end, argv);
  while (f.next()) {
    if (f.is("--help") || f.is("-h"))
      return o.help = true, o;
    else if (f.is("--link"))
      o.link = f.value();
    else if (f.is("--world"))
      o.world = int(f.int_value(1, NetLab::kMaxWorld));
    else if (f.is("--port"))
      o.port = int(f.int_value(1024, 65535));
    else if (f.is("--timeout"))
      o.timeout_s = f.double_value(1, 1e6);
    else
      throw std::invalid_argument("unknown flag " + f.name());
  }
  for (int i = flags_end + 1; i < argc; ++i) o.command.push_back(argv[i]);
  if (o.link.empty()) throw std::invalid_argument("--link is required");
  if (o.command.empty()) throw std::invalid_argument("no command after --");
  return o;
}

}  // namespace

int cmd_lab(int argc, char** argv) {
  LabOptions o;
  LinkSpec link;
  try {
    o = parse(argc, argv);
    if (o.help) return std::printf("%s", kUsage), 0;
    link = parse_link(o.link);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph lab: %s\n%s", e.what(), kUsage);
    return 2;
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
  return report_ranks("ddph lab", exits) ? 0 : 1;
}

}  // namespace ddph_tool
