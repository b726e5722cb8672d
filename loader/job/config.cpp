// The values of a job file that its parser (config_parse.cpp) and the job's
// later checks share: positions, the problem list and its printable lines,
// bucket checks and durations.
#include "loader/job/config.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/base/error.h"

namespace ddph {
namespace loader {

std::string to_string(const Location& at) {
  if (at.line <= 0) return at.source;
  return at.source + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
}

namespace {

// Cuts line to at most max bytes, not inside a UTF-8 sequence, and says so.
std::string shortened(std::string line, size_t max) {
  if (line.size() <= max) return line;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  const size_t left = line.size() - cut;
  line.resize(cut);
  return line + "... (" + std::to_string(left) + " more bytes)";
}

// The length of the UTF-8 sequence at s[i], 0 if it is not one.
size_t utf8_length(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  char esc[8];
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += char(c);
      ++i;
      continue;
    }
    const size_t n = c >= 0x80 ? utf8_length(text, i) : 0;
    const unsigned char next = n == 2 ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (n == 2 && c == 0xC2 && next < 0xA0) {  // a C1 control, e.g. U+009B (CSI)
      std::snprintf(esc, sizeof esc, "\\u%04x", unsigned(next));
      out += esc;
    } else if (n > 0) {
      out.append(text, i, n);
    } else {
      std::snprintf(esc, sizeof esc, "\\x%02x", unsigned(c));
      out += esc;
    }
    i += n > 0 ? n : 1;
  }
  return out;
}

void Problems::add(const Location& at, const std::string& key, ddph_code_t code,
                   const std::string& message) {
  if (lines_.empty()) first_code_ = code;
  if (lines_.size() >= kMaxProblemLines) {
    ++dropped_;
    return;
  }
  lines_.push_back(
      shortened(printable(to_string(at) + ": " + (key.empty() ? "" : key + ": ") + message),
                kMaxProblemLineBytes));
}

std::vector<std::string> Problems::lines() const {
  std::vector<std::string> out = lines_;
  if (dropped_ > 0) out.push_back("... and " + std::to_string(dropped_) + " more problems");
  return out;
}

std::string Problems::text() const {
  std::string out;
  for (const std::string& line : lines()) out += (out.empty() ? "" : "\n") + line;
  return out;
}

void Problems::throw_if_any() const {
  if (!lines_.empty()) throw Error(first_code_, text());
}

const char* bucket_check_name(BucketCheck check) {
  switch (check) {
    case BucketCheck::kStrict:
      return "strict";
    case BucketCheck::kOff:
      return "off";
    case BucketCheck::kAuto:
      break;
  }
  return "auto";
}

bool parse_bucket_check(const std::string& text, BucketCheck* out) {
  for (BucketCheck c : {BucketCheck::kAuto, BucketCheck::kStrict, BucketCheck::kOff})
    if (text == bucket_check_name(c)) {
      *out = c;
      return true;
    }
  return false;
}

bool parse_duration_ms(const std::string& text, int64_t* ms) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !std::isfinite(value) || value < 0) return false;
  std::string unit(end);
  double scale;
  if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "ms")
    scale = 1;
  else if (unit == "m")
    scale = 60 * 1000;
  else if (unit == "h")
    scale = 3600 * 1000;
  else
    return false;
  double total = value * scale;
  if (total > 1e15) return false;
  *ms = int64_t(std::llround(total));
  return true;
}

}  // namespace loader
}  // namespace ddph
