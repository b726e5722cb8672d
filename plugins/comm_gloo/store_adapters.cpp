#include "plugins/comm_gloo/store_adapters.h"

#include <errno.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "plugins/comm_gloo/errors.h"

namespace ddph {
namespace comm_gloo {
namespace {

constexpr const char kFileScheme[] = "file://";
constexpr const char kRedisScheme[] = "redis://";
constexpr int kDefaultRedisPort = 6379;

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

struct RedisAddress {
  std::string host;
  int port;
};

RedisAddress parse_redis(const std::string& url) {
  std::string rest = url.substr(sizeof kRedisScheme - 1);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  RedisAddress a{rest, kDefaultRedisPort};
  size_t colon = rest.rfind(':');
  if (colon != std::string::npos) {
    a.host = rest.substr(0, colon);
    std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    DDPH_CHECK(
        !port.empty() && *end == '\0' && p >= 1 && p <= 65535, DDPH_INVALID_ARGUMENT,
        "init.rendezvous '" << url << "': port '" << port << "' is not a number in [1, 65535]");
    a.port = int(p);
  }
  DDPH_CHECK(!a.host.empty(), DDPH_INVALID_ARGUMENT,
             "init.rendezvous '" << url << "': no host (expected redis://HOST:PORT)");
  return a;
}

std::string file_dir(const std::string& url) {
  std::string dir = url.substr(sizeof kFileScheme - 1);
  DDPH_CHECK(
      !dir.empty() && dir[0] == '/', DDPH_INVALID_ARGUMENT,
      "init.rendezvous '" << url << "': a file store needs an absolute path (file:///abs/dir)");
  return dir;
}

// mkdir -p; ranks race to create it, so EEXIST is success.
void make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST)
      DDPH_FAIL(DDPH_COMM_FAILURE,
                "rendezvous: cannot create directory '" << part << "': " << strerror(errno));
  }
}

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

void check_rendezvous_url(const std::string& url) {
  if (starts_with(url, kFileScheme)) {
    file_dir(url);
  } else if (starts_with(url, kRedisScheme)) {
    parse_redis(url);
  } else {
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, "init.rendezvous '"
                                         << url
                                         << "' is not a supported URL (expected "
                                            "file:///abs/dir or redis://host:port)");
  }
}

std::unique_ptr<::gloo::rendezvous::Store> open_url_store(const std::string& url, int rank) {
  check_rendezvous_url(url);
  std::unique_ptr<::gloo::rendezvous::Store> store;
  if (starts_with(url, kFileScheme)) {
    std::string dir = file_dir(url);
    make_dirs(dir);
    gloo_call("rendezvous (file store)", rank,
              [&] { store.reset(new ::gloo::rendezvous::FileStore(dir)); });
  } else {
    RedisAddress a = parse_redis(url);
    gloo_call("rendezvous (redis store)", rank,
              [&] { store.reset(new ::gloo::rendezvous::RedisStore(a.host, a.port)); });
  }
  return std::unique_ptr<::gloo::rendezvous::Store>(new WholeSecondWaitStore(std::move(store)));
}

}  // namespace comm_gloo
}  // namespace ddph
