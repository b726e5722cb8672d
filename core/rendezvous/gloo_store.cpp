#include "core/rendezvous/gloo_store.h"

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>

#include <algorithm>

#include "core/error.h"
#include "core/rendezvous_url.h"

namespace ddph {
namespace rendezvous {
namespace {

// gloo's FileStore and RedisStore measure a wait in whole seconds and give
// up only once that count exceeds the timeout: a 2000 ms wait ends after 3 s.
// Asking them for (ceil(timeout in s) - 1) s makes them give up at the first
// whole second >= the timeout (0 would mean "no timeout" to gloo, hence 1 ms).
class WholeSecondWaitStore : public ::gloo::rendezvous::Store {
 public:
  explicit WholeSecondWaitStore(std::unique_ptr<::gloo::rendezvous::Store> inner)
      : inner_(std::move(inner)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    inner_->set(key, data);
  }
  std::vector<char> get(const std::string& key) override { return inner_->get(key); }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(keys); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const int64_t ms = timeout.count();
    const int64_t whole_seconds = (ms + 999) / 1000;
    inner_->wait(keys, std::chrono::milliseconds(std::max<int64_t>(1, (whole_seconds - 1) * 1000)));
  }

 private:
  std::unique_ptr<::gloo::rendezvous::Store> inner_;
};

}  // namespace

HostStore::HostStore(const ddph_store_t* store, std::chrono::milliseconds default_timeout)
    : store_(store), default_timeout_(default_timeout) {}

void HostStore::set(const std::string& key, const std::vector<char>& data) {
  DDPH_CALL(store_->set(store_->ctx, key.c_str(), data.data(), data.size()));
}

std::vector<char> HostStore::get(const std::string& key) {
  return get_within(key, default_timeout_);
}

void HostStore::wait(const std::vector<std::string>& keys) {
  wait(keys, default_timeout_);
}

void HostStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  // The ABI's store has no wait; a get that discards the value blocks the
  // same way. One deadline covers all keys.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    get_within(key, std::max(left, std::chrono::milliseconds(1)));
  }
}

std::vector<char> HostStore::get_within(const std::string& key, std::chrono::milliseconds timeout) {
  std::vector<char> value;
  bool written = false;
  struct Sink {
    std::vector<char>* value;
    bool* written;
  } sink{&value, &written};
  ddph_write_fn write = [](void* s, const void* bytes, size_t n) {
    Sink* k = static_cast<Sink*>(s);
    const char* b = static_cast<const char*>(bytes);
    k->value->assign(b, b + n);
    *k->written = true;
  };
  DDPH_CALL(store_->get(store_->ctx, key.c_str(), int64_t(timeout.count()), write, &sink));
  DDPH_CHECK(written, DDPH_COMM_FAILURE,
             "host store get('" << key << "') succeeded but never wrote a value");
  return value;
}

std::unique_ptr<::gloo::rendezvous::Store> open_url_store(const std::string& url, int rank) {
  const RendezvousUrl parsed = parse_rendezvous_url(url);
  std::unique_ptr<::gloo::rendezvous::Store> store;
  const char* what = parsed.kind == RendezvousUrl::kFile ? "file store" : "redis store";
  try {
    if (parsed.kind == RendezvousUrl::kFile) {
      make_rendezvous_dirs(parsed.dir);
      store.reset(new ::gloo::rendezvous::FileStore(parsed.dir));
    } else {
      store.reset(new ::gloo::rendezvous::RedisStore(parsed.host, parsed.port));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    DDPH_FAIL(DDPH_COMM_FAILURE,
              "rendezvous (" << what << ") on rank " << rank << ": gloo: " << e.what());
  }
  return std::unique_ptr<::gloo::rendezvous::Store>(new WholeSecondWaitStore(std::move(store)));
}

std::shared_ptr<::gloo::rendezvous::Store> open_init_store(const ddph_comm_init_t& init) {
  if (init.store != nullptr)
    return std::make_shared<HostStore>(init.store, std::chrono::milliseconds(init.timeout_ms));
  return open_url_store(init.rendezvous, init.rank);
}

}  // namespace rendezvous
}  // namespace ddph
