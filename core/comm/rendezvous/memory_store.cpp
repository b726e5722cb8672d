// The store of a world of one: nobody else meets there, so the keys a
// session writes (its job claim, its communicator's address) stay in this
// process.
#include <map>
#include <mutex>

#include "core/comm/rendezvous/kv_store.h"

namespace ddph {
namespace rendezvous {
namespace {

class MemoryStore : public KvStore {
 public:
  void set(const std::string& key, const std::string& value, Deadline) override {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  bool add(const std::string& key, const std::string& value, Deadline) override {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.emplace(key, value).second;
  }
  bool try_get(const std::string& key, std::string* value, Deadline) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    if (it == values_.end()) return false;
    *value = it->second;
    return true;
  }
  void erase(const std::string& key, Deadline) override {
    std::lock_guard<std::mutex> lock(mu_);
    values_.erase(key);
  }
  std::string describe() const override { return "this process's store (a world of one)"; }
  std::string how_to_remove(const std::string&) const override {
    return "nothing to remove: the keys go with the process";
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> values_;
};

}  // namespace

std::unique_ptr<KvStore> memory_store() {
  return std::make_unique<MemoryStore>();
}

}  // namespace rendezvous
}  // namespace ddph
