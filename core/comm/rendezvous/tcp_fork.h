// The sockets of this process's tcp store servers, which a child forked
// while a server runs closes at once. The child (a data loader's workers,
// multiprocessing) has no server thread; if it kept them, it would hold
// rank 0's port after the server is gone (the job's next rank 0 could not
// listen there) and keep the clients' connections open (a rank would wait
// for its deadline instead of hearing at once that rank 0 went).
#pragma once

#include <functional>

#include "core/comm/rendezvous/tcp_socket.h"

namespace ddph {
namespace rendezvous {
namespace tcp {

// Runs make (a new descriptor, or an invalid one) and registers what it
// made, under one lock with the fork handlers, so that no fork comes between
// a socket's birth and its registration. [thread-safe]
Fd server_socket(const std::function<Fd()>& make);

// Unregisters fd and closes it. [thread-safe]
void release_server_socket(Fd& fd);

}  // namespace tcp
}  // namespace rendezvous
}  // namespace ddph
