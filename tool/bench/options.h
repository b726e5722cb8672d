// `ddph bench`'s options, as parsed and checked (bench_command.cpp), which
// every part of the bench reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tool/lab/net_lab.h"

namespace ddph::tool {

struct BenchOptions {
  std::vector<std::string> configs;
  std::vector<std::string> config_args;  // positional, the same as --config
  int world = 2;
  std::string bucket_size = "25MiB";  // PyTorch DDP's default bucket_cap_mb
  int64_t bucket_bytes = 0;           // bucket_size, parsed
  int iters = 10;
  int warmup = 2;
  bool json = false;
  double timeout_s = 600;
  std::string matrix;                        // --matrix ROWSxCOLS
  int64_t matrix_rows = 0, matrix_cols = 0;  // --matrix; 0: one flat parameter
  std::string dtype = "f32";                 // of the bucket (--dtype)
  int overlap_buckets = 0;                   // --overlap N; 0: the plain bench
  double backward_ms = 5;                    // --backward-ms, with --overlap
  int machines = 0;                          // --machines M; 0: no simulated machines
  std::string device = "cpu";                // --device: where the bucket lives
  std::string link_text;                     // --link
  LinkSpec link;                             // --link; rate 0: plain loopback
};

// The bucket's elements: o.bucket_bytes of fp32, whatever --dtype.
inline int64_t bucket_numel(const BenchOptions& o) {
  return o.bucket_bytes / 4 > 1 ? o.bucket_bytes / 4 : 1;
}

}  // namespace ddph::tool
