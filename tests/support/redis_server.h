// A real Redis server for rendezvous tests (Debian redis-server), and the
// loopback port helpers they need.
#pragma once

#include <string>

namespace ddph_test {

// A TCP port on 127.0.0.1 that nothing listens on at the time of the call.
int free_port();

// A redis-server on 127.0.0.1:port (no persistence), started and waited for;
// its pid, or -1 when /usr/bin/redis-server is missing or does not start.
// The caller ends it (kill + waitpid).
int start_redis(int port);

// Runs a redis-cli command against 127.0.0.1:port and returns its output.
std::string redis_cli(int port, const std::string& args);

}  // namespace ddph_test
