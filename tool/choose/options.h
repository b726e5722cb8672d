// `ddph choose`'s options, as parsed and checked (choose_command.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tool/lab/net_lab.h"

namespace ddph::tool {

struct ChooseOptions {
  int world = 2;
  std::vector<std::string> bucket_sizes = {"25MiB"};  // PyTorch DDP's bucket_cap_mb
  std::vector<int64_t> bucket_bytes;                  // bucket_sizes parsed, ascending
  std::string candidates;                             // --candidates; "": the auto hook's default
  int max_steps = 300;                                // --steps: the cap
  double timeout_s = 600;
  std::string matrix;                        // --matrix ROWSxCOLS
  int64_t matrix_rows = 0, matrix_cols = 0;  // 0: one flat parameter per bucket
  std::string link_text;                     // --link
  LinkSpec link;                             // rate 0: plain loopback
  bool json = false;
  int rank = -1;           // --rank: this process is that rank alone; -1: launch them all
  std::string rendezvous;  // --rendezvous, with --rank
};

}  // namespace ddph::tool
