#include "tests/support/torch_ref.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tests/support/multiprocess.h"

namespace ddph_test {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

void write_file(const std::string& path, const char* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(data, std::streamsize(n));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("torch script wrote no " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

bool torch_available() {
  static const bool ok = [] {
    std::string cmd = std::string(kPython) + " -c 'import torch, numpy' >/dev/null 2>&1";
    int rc = std::system(cmd.c_str());
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
  }();
  return ok;
}

namespace {

// FNV-1a 64 over everything that decides a script's outputs.
uint64_t run_key(const std::string& script, const Blobs& inputs,
                 const std::vector<std::string>& outputs) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&](const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(p[i])) * 1099511628211ull;
    const uint64_t len = n;  // so that "ab" + "c" differs from "a" + "bc"
    for (int i = 0; i < 8; ++i) h = (h ^ uint8_t(len >> (8 * i))) * 1099511628211ull;
  };
  add(kPython, std::strlen(kPython));
  add(script.data(), script.size());
  for (const auto& kv : inputs) {
    add(kv.first.data(), kv.first.size());
    add(kv.second.data(), kv.second.size());
  }
  for (const auto& name : outputs) add(name.data(), name.size());
  return h;
}

// Where the outputs of one (script, inputs) are kept: a parameterized test
// runs each case in a process of its own (ctest), and each would otherwise
// start PyTorch for the same reference (5 s each). Per user, in the temp
// directory, so a fresh machine starts empty.
std::string cache_dir(uint64_t key) {
  const char* tmp = std::getenv("TMPDIR");
  char name[64];
  std::snprintf(name, sizeof name, "/ddph-torch-cache-%u/%016llx", unsigned(getuid()),
                static_cast<unsigned long long>(key));
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + name;
}

}  // namespace

Blobs run_torch(const std::string& script, const Blobs& inputs,
                const std::vector<std::string>& outputs) {
  const std::string cached = cache_dir(run_key(script, inputs, outputs));
  if (std::filesystem::exists(cached + "/complete")) {
    Blobs out;
    for (const auto& name : outputs) out[name] = read_file(cached + "/" + name);
    return out;
  }
  const std::string dir = make_temp_dir("ddph-torch");
  for (const auto& kv : inputs)
    write_file(dir + "/" + kv.first, kv.second.data(), kv.second.size());
  write_file(dir + "/script.py", script.data(), script.size());
  const std::string log = dir + "/log.txt";
  const std::string cmd =
      std::string(kPython) + " " + dir + "/script.py " + dir + " >" + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    std::vector<char> text = read_file(log);
    throw std::runtime_error("torch script failed:\n" + std::string(text.begin(), text.end()));
  }
  Blobs out;
  for (const auto& name : outputs) out[name] = read_file(dir + "/" + name);
  // Kept whole or not at all: the outputs and a marker go into a directory
  // of their own, renamed into place (a process that loses the race to
  // another one drops its copy).
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(cached).parent_path(), ec);
  const std::string staged = dir + "/cache";
  std::filesystem::create_directory(staged, ec);
  for (const auto& kv : out)
    write_file(staged + "/" + kv.first, kv.second.data(), kv.second.size());
  write_file(staged + "/complete", "", 0);
  std::filesystem::rename(staged, cached, ec);
  std::filesystem::remove_all(dir, ec);
  return out;
}

}  // namespace ddph_test
