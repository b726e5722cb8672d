// Running a short PyTorch script at test time (Debian's /usr/bin/python3 with
// python3-torch), so kernels and hooks can be compared with torch itself
// instead of with numbers written down once.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace ddph_test {

using Blobs = std::map<std::string, std::vector<char>>;

// True when /usr/bin/python3 can import torch and numpy (checked once).
bool torch_available();

// Writes each input blob to DIR/<name>, runs `script` as
// `/usr/bin/python3 script.py DIR`, and returns the blobs it wrote under the
// names in `outputs`. Throws std::runtime_error with the script's output on
// failure.
Blobs run_torch(const std::string& script, const Blobs& inputs,
                const std::vector<std::string>& outputs);

template <class T>
std::vector<char> to_blob(const std::vector<T>& v) {
  const char* p = reinterpret_cast<const char*>(v.data());
  return std::vector<char>(p, p + v.size() * sizeof(T));
}

template <class T>
std::vector<T> from_blob(const std::vector<char>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace ddph_test
