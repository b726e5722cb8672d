#include "core/comm/rendezvous/tcp_fork.h"

#include <pthread.h>
#include <unistd.h>

#include <mutex>
#include <set>

namespace ddph {
namespace rendezvous {
namespace tcp {
namespace {

std::mutex& fds_mu() {
  static auto* mu = new std::mutex;  // never destroyed: a fork may come at exit
  return *mu;
}

std::set<int>& fds() {
  static auto* set = new std::set<int>;
  return *set;
}

void close_in_child() {
  for (int fd : fds()) close(fd);
  fds().clear();
  fds_mu().unlock();
}

// Once per process: the handlers lock the one mutex. glibc drops them when
// the library that holds them is unloaded.
void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { fds_mu().lock(); }, [] { fds_mu().unlock(); }, &close_in_child);
  });
}

}  // namespace

Fd server_socket(const std::function<Fd()>& make) {
  install_fork_handlers();
  std::lock_guard<std::mutex> lock(fds_mu());
  Fd fd = make();
  if (fd.valid()) fds().insert(fd.get());
  return fd;
}

void release_server_socket(Fd& fd) {
  std::lock_guard<std::mutex> lock(fds_mu());
  if (fd.valid()) fds().erase(fd.get());
  fd.reset();
}

}  // namespace tcp
}  // namespace rendezvous
}  // namespace ddph
