#include "core/comm/rendezvous/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/base/error.h"

namespace ddph {
namespace rendezvous {
namespace {

timeval left_until(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  // A zero timeval would mean "no timeout" to the socket layer.
  const int64_t us = std::max<int64_t>(1000, left.count());
  timeval tv{};
  tv.tv_sec = time_t(us / 1000000);
  tv.tv_usec = suseconds_t(us % 1000000);
  return tv;
}

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

}  // namespace

RedisStore::RedisStore(std::string host, int port, int rank, std::chrono::milliseconds key_ttl)
    : host_(std::move(host)), port_(port), rank_(rank), key_ttl_(key_ttl) {}

RedisStore::~RedisStore() {
  drop_connection();
}

std::string RedisStore::describe() const {
  return "redis store " + host_ + ":" + std::to_string(port_);
}

std::string RedisStore::how_to_remove(const std::string& prefix) const {
  const std::string cli = "redis-cli -h " + host_ + " -p " + std::to_string(port_);
  std::string how = cli + " --scan --pattern '" + prefix + "*' | xargs -r " + cli + " del";
  if (key_ttl_.count() > 0)
    how += " (they also expire by themselves " + std::to_string((key_ttl_.count() + 999) / 1000) +
           " s after they were written)";
  return how;
}

void RedisStore::drop_connection() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

void RedisStore::connect(Deadline deadline) {
  DDPH_CHECK(Clock::now() < deadline, DDPH_TIMEOUT,
             describe() << " on rank " << rank_ << ": no time left to connect");
  ctx_ = redisConnectWithTimeout(host_.c_str(), port_, left_until(deadline));
  DDPH_CHECK(ctx_ != nullptr, DDPH_OUT_OF_MEMORY, describe() << ": cannot allocate a context");
  if (ctx_->err != 0) {
    const std::string why = ctx_->errstr;
    const bool timed_out =
        ctx_->err == REDIS_ERR_IO && (errno == EINPROGRESS || errno == ETIMEDOUT);
    drop_connection();
    DDPH_FAIL(timed_out ? DDPH_TIMEOUT : DDPH_COMM_FAILURE,
              "rendezvous (" << describe() << ") on rank " << rank_
                             << ": cannot connect to Redis: " << why);
  }
}

redisReply* RedisStore::command(Deadline deadline, const char* what, int argc, const char** argv,
                                const size_t* lengths) {
  if (ctx_ == nullptr) connect(deadline);
  const timeval tv = left_until(deadline);
  redisSetTimeout(ctx_, tv);
  errno = 0;
  auto* reply = static_cast<redisReply*>(redisCommandArgv(ctx_, argc, argv, lengths));
  if (reply == nullptr) {
    const int err = ctx_->err;
    const int saved_errno = errno;
    const std::string why = ctx_->errstr;
    drop_connection();
    // hiredis reports a socket timeout as an I/O error (EAGAIN); past the
    // deadline, any I/O error is the server not answering in time.
    const bool timed_out =
        err == REDIS_ERR_IO &&
        (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || Clock::now() >= deadline);
    DDPH_FAIL(timed_out ? DDPH_TIMEOUT : DDPH_COMM_FAILURE,
              describe() << " on rank " << rank_ << ": " << what << ": "
                         << (timed_out ? "the server did not answer in time (is it stopped or "
                                         "overloaded?)"
                                       : "the connection failed: " + why));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    const std::string why(reply->str, reply->len);
    freeReplyObject(reply);
    DDPH_FAIL(DDPH_COMM_FAILURE,
              describe() << " on rank " << rank_ << ": " << what << ": Redis answered: " << why);
  }
  return reply;
}

void RedisStore::set(const std::string& key, const std::string& value, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string ttl = std::to_string(key_ttl_.count());
  std::vector<const char*> argv = {"SET", key.data(), value.data()};
  std::vector<size_t> len = {3, key.size(), value.size()};
  if (key_ttl_.count() > 0) {
    argv.insert(argv.end(), {"PX", ttl.data()});
    len.insert(len.end(), {2, ttl.size()});
  }
  Reply(
      command(deadline, ("set '" + key + "'").c_str(), int(argv.size()), argv.data(), len.data()));
}

bool RedisStore::add(const std::string& key, const std::string& value, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string ttl = std::to_string(key_ttl_.count());
  std::vector<const char*> argv = {"SET", key.data(), value.data(), "NX"};
  std::vector<size_t> len = {3, key.size(), value.size(), 2};
  if (key_ttl_.count() > 0) {
    argv.insert(argv.end(), {"PX", ttl.data()});
    len.insert(len.end(), {2, ttl.size()});
  }
  Reply reply(command(deadline, ("set '" + key + "' if absent").c_str(), int(argv.size()),
                      argv.data(), len.data()));
  return reply->type != REDIS_REPLY_NIL;  // NX on an existing key answers nil
}

bool RedisStore::try_get(const std::string& key, std::string* value, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  const char* argv[] = {"GET", key.data()};
  const size_t len[] = {3, key.size()};
  Reply reply(command(deadline, ("get '" + key + "'").c_str(), 2, argv, len));
  if (reply->type == REDIS_REPLY_NIL) return false;
  DDPH_CHECK(reply->type == REDIS_REPLY_STRING, DDPH_COMM_FAILURE,
             describe() << ": get '" << key << "' answered a reply of type " << reply->type);
  value->assign(reply->str, reply->len);
  return true;
}

void RedisStore::try_get_many(const std::vector<std::string>& keys,
                              std::vector<std::string>* values, std::vector<bool>* found,
                              Deadline deadline) {
  constexpr size_t kPerCommand = 1000;
  values->assign(keys.size(), std::string());
  found->assign(keys.size(), false);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t first = 0; first < keys.size(); first += kPerCommand) {
    const size_t n = std::min(kPerCommand, keys.size() - first);
    std::vector<const char*> argv = {"MGET"};
    std::vector<size_t> len = {4};
    for (size_t i = first; i < first + n; ++i) {
      argv.push_back(keys[i].data());
      len.push_back(keys[i].size());
    }
    Reply reply(command(deadline,
                        ("get " + std::to_string(n) + " keys from '" + keys[first] + "'").c_str(),
                        int(argv.size()), argv.data(), len.data()));
    DDPH_CHECK(reply->type == REDIS_REPLY_ARRAY && reply->elements == n, DDPH_COMM_FAILURE,
               describe() << ": MGET of " << n << " keys answered a reply of type " << reply->type
                          << " with " << reply->elements << " elements");
    for (size_t j = 0; j < n; ++j) {
      const redisReply* r = reply->element[j];
      if (r->type == REDIS_REPLY_NIL) continue;
      DDPH_CHECK(
          r->type == REDIS_REPLY_STRING, DDPH_COMM_FAILURE,
          describe() << ": get '" << keys[first + j] << "' answered a reply of type " << r->type);
      (*values)[first + j].assign(r->str, r->len);
      (*found)[first + j] = true;
    }
  }
}

void RedisStore::erase(const std::string& key, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  const char* argv[] = {"DEL", key.data()};
  const size_t len[] = {3, key.size()};
  Reply(command(deadline, ("delete '" + key + "'").c_str(), 2, argv, len));
}

}  // namespace rendezvous
}  // namespace ddph
