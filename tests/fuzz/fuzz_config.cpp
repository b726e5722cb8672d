// The YAML job loader and validator on arbitrary text: every input either
// passes or is refused with an error; nothing crashes, leaks or hangs.
#include <dirent.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "loader/job/job.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("DDPH_PLUGIN_PATH", DDPH_PLUGIN_DIR, 1);
  // Each check_job loads and unloads the plugins it names. Held open here,
  // they stay mapped: libFuzzer keeps reading an instrumented library's
  // coverage counters, and an unmapped one would crash the fuzzer itself.
  if (DIR* d = opendir(DDPH_PLUGIN_DIR)) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind("libddph_", 0) == 0)
        dlopen((std::string(DDPH_PLUGIN_DIR) + "/" + e->d_name).c_str(), RTLD_NOW);
    closedir(d);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddph::loader::ConfigSource source;
  source.text.assign(reinterpret_cast<const char*>(data), size);
  source.is_text = true;
  // check_job reports problems as lines; it must not throw anything else.
  (void)ddph::loader::check_job(source);
  return 0;
}
