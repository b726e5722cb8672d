// Google Benchmark helper: a benchmark registered with ->Apply(levels) runs
// once per instruction-set level (the argument), labelled with its name, and
// reports an error where this CPU lacks the level.
#pragma once

#include <benchmark/benchmark.h>

#include "core/kernels/isa.h"

namespace ddph_test {

struct BenchIsaLevel {
  explicit BenchIsaLevel(benchmark::State& st)
      : previous(ddph::set_isa_limit(ddph::Isa(st.range(0)))) {
    if (int(ddph::isa_active()) != st.range(0)) st.SkipWithError("level not supported here");
    st.SetLabel(ddph::isa_name(ddph::isa_active()));
  }
  ~BenchIsaLevel() { ddph::set_isa_limit(previous); }
  ddph::Isa previous;
};

}  // namespace ddph_test
