#include "tests/fuzz/fuzz_session.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ddph_fuzz {

std::vector<ddph_session_t*> open_sessions(const std::vector<std::string>& hooks) {
  setenv("DDPH_PLUGIN_PATH", DDPH_PLUGIN_DIR, 1);
  char dir[] = "/tmp/ddph-fuzz-XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  std::vector<ddph_session_t*> sessions;
  for (const std::string& hook : hooks) {
    const std::string yaml = "comm: {backend: gloo, timeout: 10s}\nhook: " + hook + "\n";
    const std::string rdv = std::string("file://") + dir;
    ddph_session_options_t o{};
    o.struct_size = sizeof o;
    o.yaml_text = yaml.c_str();
    o.rank = 0;
    o.world_size = 1;
    o.rendezvous = rdv.c_str();
    ddph_session_t* s = nullptr;
    if (ddph_error_t* e = ddph_session_open(&o, &s)) {
      std::fprintf(stderr, "fuzz setup: cannot open %s: %s\n", hook.c_str(), ddph_error_message(e));
      std::abort();
    }
    sessions.push_back(s);
  }
  return sessions;
}

namespace {
void record(void* user, ddph_error_t* e) {
  *static_cast<ddph_code_t*>(user) = ddph_error_code(e);
  ddph_error_free(e);
}
}  // namespace

ddph_code_t run(ddph_session_t* s, ddph_bucket_t* b) {
  ddph_code_t code = DDPH_INTERNAL;
  if (ddph_error_t* e = ddph_session_submit(s, b, record, &code)) {
    code = ddph_error_code(e);
    ddph_error_free(e);
    return code;
  }
  ddph_error_free(ddph_session_flush(s));
  return code;
}

}  // namespace ddph_fuzz
