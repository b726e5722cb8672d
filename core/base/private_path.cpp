#include "core/base/private_path.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>

namespace ddph {

std::string user_name(uid_t uid) {
  char buf[4096];
  passwd pw{}, *found = nullptr;
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr)
    return std::string(found->pw_name) + " (uid " + std::to_string(uid) + ")";
  return "uid " + std::to_string(uid);
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(mode & 07777));
  return buf;
}

PathTrust check_trusted(const struct stat& st) {
  PathTrust t;
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    t.problem = PathTrust::kOwner;
    t.what = "belongs to " + user_name(st.st_uid) + ", not to this user, " + user_name(me) +
             (me == 0 ? "" : ", nor to root");
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    t.problem = PathTrust::kMode;
    t.what = "has mode " + octal_mode(st.st_mode) + ": its group or other users may write to it";
  }
  return t;
}

}  // namespace ddph
