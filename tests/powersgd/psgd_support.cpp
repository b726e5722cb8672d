#include "tests/powersgd/psgd_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/base/le_bytes.h"
#include "tests/support/checkpoint_layout.h"
#include "tests/support/session_ranks.h"

namespace ddph_test {
namespace psgd {

std::string yaml(const std::string& hook, const std::string& options, const std::string& wrapper) {
  const std::string inner = "{family: powersgd, name: " + hook + ", options: {" + options + "}}";
  if (wrapper.empty()) return "comm: {backend: gloo, timeout: 30s}\nhook: " + inner + "\n";
  return "comm: {backend: gloo, timeout: 30s}\nhook: {family: default, name: " + wrapper +
         ", wrap: " + inner + "}\n";
}

std::string hook_blob_from_doc(uint32_t kind, uint64_t iter, uint32_t seed,
                               const std::map<uint64_t, Memory>& buckets) {
  ddph::LeWriter w;
  for (char c : std::string("DDPHPSGD")) w.put(uint8_t(c), 1);
  w.put(1, 4);  // version
  w.put(kind, 4);
  w.put(iter, 8);
  w.put(624, 4);  // position: the next draw twists first
  uint32_t mt = seed;
  for (int i = 0; i < 624; ++i) {
    w.put(mt, 4);
    mt = 1812433253u * (mt ^ (mt >> 30)) + uint32_t(i + 1);
  }
  w.put(buckets.size(), 4);
  for (const auto& kv : buckets) {
    w.put(kv.first, 8);
    w.put(kv.second.p.empty() && kv.second.q.empty() ? 0 : 1, 1);  // P and Q present
    w.put_floats(kv.second.p);
    w.put_floats(kv.second.q);
    w.put_floats(kv.second.error);
  }
  w.put(ddph::fnv1a64(w.bytes().data(), w.bytes().size()), 8);
  return w.take();
}

std::string session_blob(const std::string& hook_name, const std::string& hook_blob) {
  return ddph_test::layout::container({{"powersgd", hook_name, hook_blob}});
}

std::vector<float> gather(ddph_session_t* s, const std::vector<float>& mine) {
  ddph_comm_t* c = ddph_session_comm(s);
  return gather_floats(s, mine, c->size(c->ctx));
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double scale = 1e-30, worst = 0;
  for (float v : b) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst / scale;
}

}  // namespace psgd
}  // namespace ddph_test
