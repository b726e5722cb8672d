#include "tests/support/session_ranks.h"

#include <cstdio>
#include <cstring>

#include "tests/support/checkpoint_layout.h"

namespace ddph_test {

namespace {
// Opens on the host's communicator `comm`, or (NULL) with a file store in
// dir; on failure *error holds the error and NULL comes back.
ddph_session_t* try_open(const std::string& yaml, int rank, int world, const std::string& dir,
                         ddph_comm_t* comm, ddph_error_t** error) {
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = yaml.c_str();
  o.rank = rank;
  o.world_size = world;
  const std::string rdv = "file://" + dir;
  if (comm != nullptr)
    o.comm = comm;
  else
    o.rendezvous = rdv.c_str();
  ddph_session_t* s = nullptr;
  *error = ddph_session_open(&o, &s);
  return s;
}

// try_open, printing nothing: on failure NULL, with the error's text in *error.
ddph_session_t* open_quietly(const std::string& yaml, int rank, int world, const std::string& dir,
                             ddph_comm_t* comm, std::string* error) {
  ddph_error_t* e = nullptr;
  ddph_session_t* s = try_open(yaml, rank, world, dir, comm, &e);
  error->clear();
  if (e != nullptr) {
    *error = ddph_error_message(e);
    ddph_error_free(e);
  }
  return s;
}
}  // namespace

ddph_session_t* open_session(const std::string& yaml, int rank, int world, const std::string& dir) {
  ddph_error_t* e = nullptr;
  ddph_session_t* s = try_open(yaml, rank, world, dir, nullptr, &e);
  if (e != nullptr) {
    std::fprintf(stderr, "[rank %d] ddph_session_open: %s\n", rank, ddph_error_message(e));
    ddph_error_free(e);
    return nullptr;
  }
  return s;
}

ddph_session_t* open_session(const std::string& yaml, int rank, int world, const std::string& dir,
                             std::string* error) {
  return open_quietly(yaml, rank, world, dir, nullptr, error);
}

ddph_session_t* open_on_host_comm(const std::string& yaml, int rank, int world, ddph_comm_t* comm,
                                  std::string* error) {
  return open_quietly(yaml, rank, world, "", comm, error);
}

OpenOutcome open_outcome(const std::string& yaml, int rank, int world, const std::string& dir) {
  ddph_error_t* e = nullptr;
  ddph_session_t* s = try_open(yaml, rank, world, dir, nullptr, &e);
  OpenOutcome out;
  if (e != nullptr) {
    out.code = ddph_error_code(e);
    out.message = ddph_error_message(e);
    ddph_error_free(e);
  }
  ddph_session_close(s);  // NULL-safe
  return out;
}

FloatBucket::FloatBucket(std::vector<float>& data, uint64_t index, uint64_t step, bool is_last) {
  shape[0] = int64_t(data.size());
  bucket.struct_size = sizeof bucket;
  bucket.index = index;
  bucket.step = step;
  bucket.is_last = is_last ? 1 : 0;
  bucket.buffer.data = data.data();
  bucket.buffer.device = {kDLCPU, 0};
  bucket.buffer.ndim = 1;
  bucket.buffer.dtype = {kDLFloat, 32, 1};
  bucket.buffer.shape = shape;
}

namespace {
void record(void* user, ddph_error_t* e) {
  auto* code = static_cast<ddph_code_t*>(user);
  *code = ddph_error_code(e);
  if (e != nullptr) std::fprintf(stderr, "bucket error: %s\n", ddph_error_message(e));
  ddph_error_free(e);
}
}  // namespace

ddph_code_t run_bucket(ddph_session_t* s, FloatBucket& b) {
  ddph_code_t code = DDPH_INTERNAL;
  if (ddph_error_t* e = ddph_session_submit(s, &b.bucket, record, &code)) {
    std::fprintf(stderr, "submit: %s\n", ddph_error_message(e));
    code = ddph_error_code(e);
    ddph_error_free(e);
    return code;
  }
  ddph_error_free(ddph_session_flush(s));  // the callback already recorded the error
  return code;
}

namespace {
struct Outcome {
  ddph_code_t code = DDPH_INTERNAL;
  std::string message;
  static void on_done(void* user, ddph_error_t* e) {
    auto* o = static_cast<Outcome*>(user);
    o->code = ddph_error_code(e);
    o->message = ddph_error_message(e);
    ddph_error_free(e);
  }
};
}  // namespace

ddph_code_t run_bucket(ddph_session_t* s, const ddph_bucket_t& b, std::string* message) {
  Outcome o;
  if (ddph_error_t* e = ddph_session_submit(s, &b, &Outcome::on_done, &o)) Outcome::on_done(&o, e);
  ddph_error_free(ddph_session_flush(s));  // the callback already recorded the error
  *message = o.message;
  return o.code;
}

bool same_on_all_ranks(ddph_session_t* s, const void* bytes, size_t n) {
  // FNV-1a digest, so the exchange is 8 bytes whatever n is.
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(bytes)[i]) * 1099511628211ull;
  ddph_comm_t* c = ddph_session_comm(s);
  const int world = c->size(c->ctx);
  int64_t mine = int64_t(h);
  std::vector<int64_t> all(world);
  int64_t one = 1, many = world;
  DLTensor send{&mine, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &one, nullptr, 0};
  DLTensor recv{all.data(), {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &many, nullptr, 0};
  if (ddph_error_t* e = c->allgather(c->ctx, &send, &recv, nullptr)) {
    std::fprintf(stderr, "allgather: %s\n", ddph_error_message(e));
    ddph_error_free(e);
    return false;
  }
  for (int64_t v : all)
    if (v != mine) return false;
  return true;
}

std::string session_state(ddph_session_t* s) {
  std::string blob;
  auto append = [](void* sink, const void* bytes, size_t n) {
    static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
  };
  if (ddph_error_t* e = ddph_session_save_state(s, append, &blob)) {
    std::fprintf(stderr, "save_state: %s\n", ddph_error_message(e));
    ddph_error_free(e);
    return "";
  }
  return blob;
}

ddph_code_t load_state(ddph_session_t* s, const std::string& blob, std::string* message) {
  ddph_error_t* e = ddph_session_load_state(s, blob.data(), blob.size());
  const ddph_code_t code = ddph_error_code(e);
  if (message != nullptr) *message = e != nullptr ? ddph_error_message(e) : "";
  ddph_error_free(e);
  return code;
}

size_t accepted_byte_changes(ddph_session_t* s, const std::string& blob, size_t* offered) {
  size_t accepted = 0;
  *offered = 0;
  auto offer = [&](const std::string& bad) {
    ++*offered;
    if (load_state(s, bad, nullptr) != DDPH_INVALID_ARGUMENT) ++accepted;
  };
  layout::for_each_byte_change(blob, {0x20},
                               [&](const std::string& bad, size_t, uint8_t) { offer(bad); });
  std::vector<layout::Record> records;
  std::string why;
  if (!layout::parse_container(blob, &records, &why)) return ++accepted;  // not a saved state
  for (size_t r = 0; r < records.size(); ++r)
    layout::for_each_byte_change(records[r].blob, {0x20},
                                 [&](const std::string& bad, size_t, uint8_t) {
                                   std::vector<layout::Record> changed = records;
                                   changed[r].blob = bad;
                                   offer(layout::container(changed));
                                 });
  return accepted;
}

std::string hook_blob(const std::string& session_blob) {
  std::vector<layout::Record> records;
  std::string why;
  if (!layout::parse_container(session_blob, &records, &why) || records.empty()) return "";
  return records[0].blob;
}

std::vector<float> gather_floats(ddph_session_t* s, const std::vector<float>& mine, int world) {
  ddph_comm_t* c = ddph_session_comm(s);
  std::vector<float> all(mine.size() * size_t(world));
  int64_t one = int64_t(mine.size()), many = int64_t(all.size());
  DLTensor send{
      const_cast<float*>(mine.data()), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &one, nullptr, 0};
  DLTensor recv{all.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &many, nullptr, 0};
  ddph_error_free(c->allgather(c->ctx, &send, &recv, nullptr));
  return all;
}

}  // namespace ddph_test
