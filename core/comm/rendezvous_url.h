// Rendezvous URLs as YAML's comm.rendezvous spells them: "file:///abs/dir"
// (a directory every rank can see) or "redis://host[:port]".
#pragma once

#include <string>

namespace ddph {

struct RendezvousUrl {
  enum Kind { kFile, kRedis } kind;
  std::string dir;   // kFile: the absolute directory
  std::string host;  // kRedis
  int port = 0;      // kRedis: 6379 unless given
};

// Parses url, or throws DDPH_INVALID_ARGUMENT naming init.rendezvous and what
// is wrong with it. Touches nothing.
RendezvousUrl parse_rendezvous_url(const std::string& url);

}  // namespace ddph
