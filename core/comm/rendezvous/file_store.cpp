#include "core/comm/rendezvous/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/base/error.h"
#include "core/base/private_path.h"

namespace ddph {
namespace rendezvous {
namespace {

// mkdir -p; the last component gets mode 0700. Ranks race to create it, so
// an existing component is success (its safety is checked afterwards).
void make_directories(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    const mode_t mode = pos == dir.size() ? 0700 : 0777;
    if (mkdir(part.c_str(), mode) != 0 && errno != EEXIST)
      DDPH_FAIL(DDPH_COMM_FAILURE,
                "rendezvous: cannot create directory '" << part << "': " << strerror(errno));
  }
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

}  // namespace

void check_private_directory(const std::string& dir) {
  struct stat st {};
  DDPH_CHECK(lstat(dir.c_str(), &st) == 0, DDPH_COMM_FAILURE,
             "rendezvous directory '" << dir << "': " << strerror(errno));
  DDPH_CHECK(S_ISDIR(st.st_mode), DDPH_INVALID_ARGUMENT,
             "rendezvous directory '" << dir << "' is not a directory"
                                      << (S_ISLNK(st.st_mode) ? " (a symbolic link)" : "")
                                      << "; name a directory of your own");
  // The rule plugins are loaded by too (core/base/private_path.h).
  const PathTrust trust = check_trusted(st);
  DDPH_CHECK(trust.problem != PathTrust::kOwner, DDPH_INVALID_ARGUMENT,
             "rendezvous directory '" << dir << "' " << trust.what
                                      << ": whoever owns it could join this job as a rank. Use "
                                         "a directory of your own (ddphooks creates a missing "
                                         "one with mode 0700)");
  DDPH_CHECK(trust.problem != PathTrust::kMode, DDPH_INVALID_ARGUMENT,
             "rendezvous directory '" << dir << "' " << trust.what
                                      << ", and so join this job as a rank. Run `chmod go-w " << dir
                                      << "` or use a directory of your own");
}

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  make_directories(dir_);
  check_private_directory(dir_);
}

std::string FileStore::path_of(const std::string& key) const {
  static const char kHex[] = "0123456789ABCDEF";
  std::string name;
  for (unsigned char c : key) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (plain) {
      name += char(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  // "." and ".." name directories; a leading '.' also marks temporary files.
  if (!name.empty() && name[0] == '.') name.replace(0, 1, "%2E");
  return dir_ + "/" + name;
}

std::string FileStore::how_to_remove(const std::string& prefix) const {
  return "rm -f '" + path_of(prefix) + "'*";
}

std::string FileStore::write_temporary(const std::string& value) const {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      dir_ + "/.tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  DDPH_CHECK(fd >= 0, DDPH_COMM_FAILURE,
             describe() << ": cannot create '" << tmp << "': " << strerror(errno));
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      DDPH_FAIL(DDPH_COMM_FAILURE, describe()
                                       << ": cannot write '" << tmp << "': " << strerror(err));
    }
    done += size_t(n);
  }
  close(fd);
  return tmp;
}

void FileStore::set(const std::string& key, const std::string& value, Deadline) {
  const std::string tmp = write_temporary(value);
  if (rename(tmp.c_str(), path_of(key).c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    DDPH_FAIL(DDPH_COMM_FAILURE, describe()
                                     << ": cannot write key '" << key << "': " << strerror(err));
  }
}

bool FileStore::add(const std::string& key, const std::string& value, Deadline) {
  const std::string tmp = write_temporary(value);
  // link(2) fails with EEXIST if the name exists: one creator wins, and the
  // file is complete the moment it appears.
  const int rc = link(tmp.c_str(), path_of(key).c_str());
  const int err = errno;
  unlink(tmp.c_str());
  if (rc == 0) return true;
  DDPH_CHECK(err == EEXIST, DDPH_COMM_FAILURE,
             describe() << ": cannot write key '" << key << "': " << strerror(err));
  return false;
}

bool FileStore::try_get(const std::string& key, std::string* value, Deadline) {
  int fd = open(path_of(key).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    DDPH_CHECK(errno == ENOENT, DDPH_COMM_FAILURE,
               describe() << ": cannot read key '" << key << "': " << strerror(errno));
    return false;
  }
  *value = read_all(fd);
  close(fd);
  return true;
}

void FileStore::erase(const std::string& key, Deadline) {
  if (unlink(path_of(key).c_str()) != 0 && errno != ENOENT)
    DDPH_FAIL(DDPH_COMM_FAILURE, describe()
                                     << ": cannot remove key '" << key << "': " << strerror(errno));
}

}  // namespace rendezvous
}  // namespace ddph
