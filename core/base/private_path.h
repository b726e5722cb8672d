// The one rule for a file or folder whose contents this process trusts: a
// rendezvous directory (whoever writes there can join the job as a rank) and
// a plugin and the folder it is in (whatever is there runs inside this
// process). It must belong to this user or to root, and neither its group
// nor other users may write to it.
#pragma once

#include <sys/stat.h>

#include <string>

namespace ddph {

struct PathTrust {
  enum Problem { kNone, kOwner, kMode };
  Problem problem = kNone;
  // What is wrong, to follow the path's name in a message: "belongs to
  // nobody (uid 65534), not to this user, alice (uid 1000), nor to root" or
  // "has mode 0777: its group or other users may write to it". Empty for kNone.
  std::string what;
  explicit operator bool() const { return problem == kNone; }
};

// Applies the rule to st, the path's own metadata (lstat for a folder that
// must not be a link; stat of the resolved path for a file).
PathTrust check_trusted(const struct stat& st);

// "nobody (uid 65534)", or "uid 12345" for a uid with no name.
std::string user_name(uid_t uid);
// "0755".
std::string octal_mode(mode_t mode);

}  // namespace ddph
