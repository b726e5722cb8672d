#include "tests/support/torch_ref.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
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

Blobs run_torch(const std::string& script, const Blobs& inputs,
                const std::vector<std::string>& outputs) {
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
  std::filesystem::remove_all(dir);
  return out;
}

}  // namespace ddph_test
