#include "tests/support/checkpoint_layout.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

namespace ddph_test {
namespace layout {
namespace {

// Little-endian reads that remember the first problem instead of throwing.
// It reads `s` in place: keep the string alive as long as the reader.
class Bytes {
 public:
  explicit Bytes(const std::string& s) : s_(s) {}
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  size_t left() const { return s_.size() - pos_; }
  void fail(const std::string& why) {
    if (why_.empty()) why_ = why;
  }
  uint64_t u(int bytes, const char* what) {
    if (!ok()) return 0;
    if (left() < size_t(bytes)) {
      fail(std::string("truncated in ") + what);
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(s_[pos_ + size_t(i)])) << (8 * i);
    pos_ += size_t(bytes);
    return v;
  }
  std::string raw(uint64_t n, const char* what) {
    if (!ok()) return "";
    if (left() < n) {
      fail(std::string("truncated in ") + what);
      return "";
    }
    std::string r = s_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return r;
  }
  // u64 count + count x f32, each finite with `finite`; returns the count.
  uint64_t floats(const char* what, bool finite) {
    const uint64_t count = u(8, what);
    if (!ok()) return 0;
    if (count > left() / 4) return fail(std::string("truncated in ") + what), 0;
    for (uint64_t i = 0; i < count; ++i) {
      const uint32_t bits = uint32_t(u(4, what));
      float f;
      std::memcpy(&f, &bits, 4);
      if (finite && !std::isfinite(f))
        fail(std::string(what) + " element " + std::to_string(i) + " is not finite");
    }
    return count;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
  std::string why_;
};

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
}

// Checks the frame around `blob` (magic, one of the versions, checksum) and
// hands back its body and version.
bool open(const std::string& blob, const char* magic8, uint32_t oldest, uint32_t newest,
          std::string* body, uint32_t* version, std::string* why) {
  if (blob.size() < 8 + 4 + 8) return *why = "shorter than a frame", false;
  if (blob.compare(0, 8, magic8, 8) != 0) return *why = "wrong magic", false;
  Bytes head(blob);
  head.raw(8, "magic");
  *version = uint32_t(head.u(4, "version"));
  if (*version < oldest || *version > newest)
    return *why = "version " + std::to_string(*version), false;
  const std::string before = blob.substr(0, blob.size() - 8);
  const std::string checksum = blob.substr(blob.size() - 8);
  Bytes tail(checksum);
  if (tail.u(8, "checksum") != fnv1a64(before)) return *why = "checksum mismatch", false;
  *body = before.substr(12);
  return true;
}

// Runs `read` over the body and requires it to end exactly at its end.
bool whole(const std::string& body, std::string* why, const std::function<void(Bytes&)>& read) {
  Bytes in(body);
  read(in);
  if (in.ok() && in.left() != 0) in.fail(std::to_string(in.left()) + " trailing bytes");
  if (!in.ok()) *why = in.why();
  return in.ok();
}

bool quantization_state(const std::string& body, std::string* why) {
  return whole(body, why, [](Bytes& in) {
    const uint64_t count = in.u(4, "bucket count");
    bool first = true;
    uint64_t last = 0;
    for (uint64_t b = 0; b < count && in.ok(); ++b) {
      const uint64_t index = in.u(8, "bucket index");
      if (!first && index <= last) in.fail("bucket indices not ascending");
      first = false;
      last = index;
      in.floats("own residual", true);
      in.floats("owner residual", true);
    }
  });
}

bool step_state(const std::string& body, std::string* why) {
  return whole(body, why, [](Bytes& in) {
    if (in.u(8, "step") > (uint64_t(1) << 53)) in.fail("step above 2^53");
  });
}

bool powersgd_state(const std::string& hook, const std::string& body, std::string* why) {
  return whole(body, why, [&](Bytes& in) {
    const uint64_t kind = in.u(4, "hook kind");
    if (kind != (hook == "batched_powersgd" ? 1u : 0u)) in.fail("another hook kind");
    in.u(8, "step");
    if (in.u(4, "rng position") > 624) in.fail("rng position past 624");
    in.raw(624 * 4, "rng words");
    const uint64_t count = in.u(4, "bucket count");
    for (uint64_t b = 0; b < count && in.ok(); ++b) {
      in.u(8, "bucket index");
      const uint64_t flags = in.u(1, "flags");
      if (flags > 1) in.fail("unknown flags");
      const uint64_t p = in.floats("P", false);
      const uint64_t q = in.floats("Q", false);
      if (flags == 0 && (p != 0 || q != 0)) in.fail("P or Q without the flag");
      // PowerSGD keeps NaN where PyTorch does (docs/powersgd.md): any float.
      in.floats("error", false);
    }
  });
}

bool optimizer_state(uint32_t version, const std::string& body, std::string* why) {
  return whole(body, why, [&](Bytes& in) {
    if (in.u(4, "optimizer") > 2) in.fail("unknown optimizer");
    const uint64_t count = in.u(4, "parameter count");
    for (uint64_t k = 0; k < count && in.ok(); ++k) {
      const uint64_t key_kind = version >= 2 ? in.u(1, "key kind") : 0;
      if (key_kind > 1) in.fail("unknown key kind");
      in.u(8, "key");
      if (key_kind == 0) in.u(4, "position");
      in.u(8, "step");
      // An optimizer keeps NaN where torch does (docs/optimizer_overlap.md).
      in.floats("momentum", false);
      in.floats("exp_avg_sq", false);
      in.floats("max_exp_avg_sq", false);
    }
  });
}

bool hierarchical_state(const std::string& body, std::string* why) {
  std::string inner;
  uint64_t has = 0;
  if (!whole(body, why, [&](Bytes& in) {
        has = in.u(1, "has_inner");
        const uint64_t size = in.u(8, "inner size");
        if (has > 1 || (has == 0 && size != 0)) in.fail("has_inner disagrees with its size");
        inner = in.raw(size, "inner state");
      }))
    return false;
  // The inner chain's state is a container of its own.
  if (has == 1 && !valid_session_state(inner, why)) return *why = "inner: " + *why, false;
  return true;
}

}  // namespace

uint64_t fnv1a64(const std::string& bytes) {
  // The project's offset basis, as the docs give it: 1469598103934665603, not
  // the FNV standard's 14695981039346656037 (core/base/le_bytes.cpp has it so, and
  // every saved checkpoint depends on it).
  uint64_t h = 1469598103934665603ull;
  for (char c : bytes) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

std::string frame(const char* magic8, uint32_t version, const std::string& body) {
  std::string out(magic8, 8);
  put(out, version, 4);
  out += body;
  put(out, fnv1a64(out), 8);
  return out;
}

std::string container(const std::vector<Record>& records) {
  std::string body;
  put(body, records.size(), 4);
  for (const Record& r : records) {
    put(body, r.family.size(), 4);
    body += r.family;
    put(body, r.hook.size(), 4);
    body += r.hook;
    put(body, r.blob.size(), 8);
    body += r.blob;
  }
  return frame("DDPHSTAT", 2, body);
}

bool parse_container(const std::string& blob, std::vector<Record>* records, std::string* why) {
  std::string body;
  uint32_t version = 0;
  if (!open(blob, "DDPHSTAT", 2, 2, &body, &version, why)) return false;
  records->clear();
  return whole(body, why, [&](Bytes& in) {
    const uint64_t count = in.u(4, "record count");
    for (uint64_t i = 0; i < count && in.ok(); ++i) {
      Record r;
      r.family = in.raw(in.u(4, "family length"), "family");
      r.hook = in.raw(in.u(4, "hook length"), "hook");
      r.blob = in.raw(in.u(8, "blob length"), "blob");
      records->push_back(std::move(r));
    }
  });
}

bool valid_hook_state(const std::string& family, const std::string& hook, const std::string& blob,
                      std::string* why) {
  std::string body;
  uint32_t version = 0;
  if (family == "quantization")
    return open(blob, "DDPHQRES", 2, 2, &body, &version, why) && quantization_state(body, why);
  if (family == "post_localsgd")
    return open(blob, "DDPHLSGD", 2, 2, &body, &version, why) && step_state(body, why);
  if (family == "powersgd")
    return open(blob, "DDPHPSGD", 1, 1, &body, &version, why) && powersgd_state(hook, body, why);
  if (family == "optimizer_overlap")
    return open(blob, "DDPHOPTM", 1, 2, &body, &version, why) &&
           optimizer_state(version, body, why);
  if (family == "hierarchical")
    return open(blob, "DDPHHIER", 2, 2, &body, &version, why) && hierarchical_state(body, why);
  *why = "no documented layout for family " + family;
  return false;
}

bool valid_session_state(const std::string& blob, std::string* why) {
  std::vector<Record> records;
  if (!parse_container(blob, &records, why)) return *why = "container: " + *why, false;
  for (const Record& r : records)
    if (!valid_hook_state(r.family, r.hook, r.blob, why))
      return *why = r.family + "/" + r.hook + ": " + *why, false;
  return true;
}

void for_each_byte_change(const std::string& blob, const std::vector<uint8_t>& masks,
                          const std::function<void(const std::string&, size_t, uint8_t)>& f) {
  std::string changed = blob;
  for (size_t at = 0; at < blob.size(); ++at)
    for (uint8_t mask : masks) {
      changed[at] = char(uint8_t(blob[at]) ^ mask);
      f(changed, at, mask);
      changed[at] = blob[at];
    }
}

}  // namespace layout
}  // namespace ddph_test
