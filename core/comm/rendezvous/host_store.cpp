// A host's ddph_store_t (e.g. PyTorch's c10d store through the Python
// package) as a KvStore.
#include <algorithm>
#include <mutex>

#include "core/base/error.h"
#include "core/base/host.h"
#include "core/comm/rendezvous/kv_store.h"

namespace ddph {
namespace rendezvous {
namespace {

class HostStore : public KvStore {
 public:
  explicit HostStore(const ddph_store_t* store) : store_(store) {}

  void set(const std::string& key, const std::string& value, Deadline) override {
    DDPH_CALL(store_->set(store_->ctx, key.c_str(), value.data(), value.size()));
  }

  // The table has no set-if-absent, and a host's store belongs to one job
  // already (c10d's store, under torchrun's or init_process_group's
  // rendezvous), so this is a plain set. Not even check-then-set: c10d's
  // FileStore ignores a wait's timeout until its file exists, which only
  // the first set creates.
  bool add(const std::string& key, const std::string& value, Deadline deadline) override {
    set(key, value, deadline);
    return true;
  }

  // A get with the shortest timeout the table can express; a missing key
  // comes back as DDPH_TIMEOUT (or, from some hosts, DDPH_NOT_FOUND).
  bool try_get(const std::string& key, std::string* value, Deadline) override {
    ddph_error_t* error = fetch(key, 1, value);
    if (error == nullptr) return true;
    const ddph_code_t code = host()->error_code(error);
    if (code != DDPH_TIMEOUT && code != DDPH_NOT_FOUND) DDPH_CALL(error);
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_miss_ = host()->error_message(error);
    }
    host()->error_free(error);
    return false;
  }

  bool probes_cheaply() const override { return false; }

  std::string last_miss() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return last_miss_;
  }

  // The host's own blocking get waits better than polling does. Its
  // timeout (or not-found) is the key not appearing: KeysMissing.
  std::string get(const std::string& key, Deadline deadline) override {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    std::string value;
    ddph_error_t* error = fetch(key, std::max<int64_t>(1, left), &value);
    if (error == nullptr) return value;
    const ddph_code_t code = host()->error_code(error);
    if (code != DDPH_TIMEOUT && code != DDPH_NOT_FOUND) DDPH_CALL(error);
    const std::string why = host()->error_message(error);
    host()->error_free(error);
    throw KeysMissing(describe() + ": key '" + key + "' did not appear in time (" + why + ")",
                      {key});
  }

  void erase(const std::string& key, Deadline) override {
    if (store_->struct_size < DDPH_STORE_SIZE_V1_4 || store_->del == nullptr) return;
    DDPH_CALL(store_->del(store_->ctx, key.c_str()));
  }

  std::string describe() const override { return "host store"; }
  std::string how_to_remove(const std::string& prefix) const override {
    return "remove the keys under '" + prefix + "' from the host's store";
  }

 private:
  ddph_error_t* fetch(const std::string& key, int64_t timeout_ms, std::string* value) {
    bool written = false;
    struct Sink {
      std::string* value;
      bool* written;
    } sink{value, &written};
    ddph_write_fn write = [](void* s, const void* bytes, size_t n) {
      Sink* k = static_cast<Sink*>(s);
      k->value->assign(static_cast<const char*>(bytes), n);
      *k->written = true;
    };
    ddph_error_t* error = store_->get(store_->ctx, key.c_str(), timeout_ms, write, &sink);
    if (error == nullptr && !written)
      return make_c_error(DDPH_COMM_FAILURE,
                          "host store get('" + key + "') succeeded but never wrote a value");
    return error;
  }

  const ddph_store_t* store_;
  mutable std::mutex mu_;
  std::string last_miss_;  // the host's words for the last key it did not have
};

}  // namespace

std::unique_ptr<KvStore> host_store(const ddph_store_t* store) {
  return std::make_unique<HostStore>(store);
}

}  // namespace rendezvous
}  // namespace ddph
