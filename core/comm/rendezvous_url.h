// Rendezvous URLs as YAML's comm.rendezvous spells them: "file:///abs/dir"
// (a directory every rank can see), "redis://host[:port]",
// "tcp://host:port" (rank 0 serves the store on port, every interface) or
// "env://" (tcp://$MASTER_ADDR:$MASTER_PORT, as torchrun and ddph lab set
// them; under torchrun's agent store, which listens on MASTER_PORT itself,
// the port after it; DDPH_MASTER_PORT, when set, names the port).
#pragma once

#include <string>

namespace ddph {

struct RendezvousUrl {
  enum Kind { kFile, kRedis, kTcp } kind;
  std::string dir;   // kFile: the absolute directory
  std::string host;  // kRedis, kTcp (an IPv6 address without its brackets)
  int port = 0;      // kRedis: 6379 unless given; kTcp: always given
  // kTcp from env://: the variables read ("MASTER_ADDR=... MASTER_PORT=...")
  // for messages; else "".
  std::string from_env;
};

// Parses url, or throws DDPH_INVALID_ARGUMENT naming source (where the URL
// came from: "init.rendezvous", "comm.rendezvous"; "" names the URL alone)
// and what is wrong with it. env:// reads MASTER_ADDR and MASTER_PORT now;
// a missing or malformed one is named. Touches nothing.
RendezvousUrl parse_rendezvous_url(const std::string& url,
                                   const std::string& source = "init.rendezvous");

// Whether url starts with one of the schemes above (file://, redis://,
// tcp://, env://), for checks that cannot parse it yet (env:// is read
// where the rank runs).
bool is_rendezvous_url(const std::string& url);

}  // namespace ddph
