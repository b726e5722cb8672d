// An independent reader and writer of the documented checkpoint layouts
// (the "Checkpoints" sections of docs/quantization.md, post_localsgd.md,
// powersgd.md, optimizer_overlap.md and hierarchical.md, and the session
// container of loader/session/state_blob.h), with its own FNV-1a and byte reading:
// it shares no code with the loader or the plugins, so tests and the state
// fuzzer's oracle can judge their blobs rather than trust them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ddph_test {
namespace layout {

// FNV-1a 64 as the checkpoint frames use it: offset basis
// 1469598103934665603 (sic: not the FNV standard's 14695981039346656037),
// prime 1099511628211.
uint64_t fnv1a64(const std::string& bytes);

// One record of the session container.
struct Record {
  std::string family, hook, blob;
};

// The session container, version 2: "DDPHSTAT", u32 2, u32 count, per
// record u32 + family, u32 + hook name, u64 + blob, then the u64 FNV-1a of
// every byte before it.
std::string container(const std::vector<Record>& records);
// The records of a container; false (and *why) when it is not one: another
// magic or version, a wrong checksum, truncation or trailing bytes.
bool parse_container(const std::string& blob, std::vector<Record>* records, std::string* why);

// A frame as core/base/le_bytes.h writes it: magic, u32 version, body, then the
// u64 FNV-1a of every byte before it. For tests that build blobs the hooks
// never save (a NaN residual with a valid checksum).
std::string frame(const char* magic8, uint32_t version, const std::string& body);

// Whether `blob` could have been saved by hook family/hook, by its
// documented layout: magic, version, checksum, every length, no trailing
// bytes, and the values the hook keeps in range (quantization residuals
// finite and bucket indices ascending, a post_localsgd step at most 2^53,
// PowerSGD's hook kind, rng position and flags, an optimizer's key kinds; a
// hierarchical blob's inner container, recursively). A family it does not
// know is not valid. *why says what is wrong.
bool valid_hook_state(const std::string& family, const std::string& hook, const std::string& blob,
                      std::string* why);
// A container whose every record is valid_hook_state.
bool valid_session_state(const std::string& blob, std::string* why);

// Calls f(changed, at, mask) with `blob` whose byte `at` is XORed with each
// mask, for every byte: the single-byte changes a checksum must catch.
void for_each_byte_change(const std::string& blob, const std::vector<uint8_t>& masks,
                          const std::function<void(const std::string&, size_t, uint8_t)>& f);

}  // namespace layout
}  // namespace ddph_test
