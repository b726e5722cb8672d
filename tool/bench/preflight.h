// What `ddph bench` can tell from a config before the run: that a
// powersgd hook will send the bench's bucket whole, so that the user hears
// it (and what to pass instead) before the run, not after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddph::tool {

struct BenchShape {
  int64_t numel = 0;                         // elements in the bucket
  int64_t bucket_bytes = 0;                  // its bytes in its dtype (rules match these)
  int64_t matrix_rows = 0, matrix_cols = 0;  // --matrix; 0: one flat parameter
  int warmup = 0, iters = 0;
};

struct CompressionForecast {
  std::string hook;      // "powersgd/powersgd"
  bool nothing = false;  // no timed iteration will compress
  std::string why;       // what stops it, and what to pass instead
};

// One entry per powersgd hook in the chain that will reduce the bench's
// bucket (the first rule that matches its bytes, else `hook`), when some of
// the timed iterations will not compress: a flat bucket (or --matrix
// matrices too small for min_compression_rate) for the layer-wise hook, or
// a start_iter after --warmup for either hook. Loads the job's plugins
// (connects nothing); throws std::runtime_error as loader::load_job does.
std::vector<CompressionForecast> forecast_compression(const std::string& config_path,
                                                      const BenchShape& shape);

}  // namespace ddph::tool
