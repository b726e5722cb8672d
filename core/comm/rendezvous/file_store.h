// A rendezvous store in a directory that every rank of a job can see (one
// machine, or a shared filesystem): one file per key.
#pragma once

#include <string>

#include "core/comm/rendezvous/kv_store.h"

namespace ddph {
namespace rendezvous {

class FileStore : public KvStore {
 public:
  // Creates dir (mode 0700, parents as needed) when missing. Throws
  // DDPH_INVALID_ARGUMENT when dir is not a directory, belongs to neither
  // this user nor root, or is writable by group or others: anyone who can
  // write there can join this user's jobs (core/base/private_path.h, the rule
  // plugins are loaded by too). DDPH_COMM_FAILURE when it cannot be created.
  explicit FileStore(std::string dir);

  void set(const std::string& key, const std::string& value, Deadline deadline) override;
  bool add(const std::string& key, const std::string& value, Deadline deadline) override;
  bool try_get(const std::string& key, std::string* value, Deadline deadline) override;
  void erase(const std::string& key, Deadline deadline) override;
  std::string describe() const override { return "file store " + dir_; }
  std::string how_to_remove(const std::string& prefix) const override;

  // The file that holds key: the key with every byte outside [A-Za-z0-9._-]
  // written as %XX, so keys with '/' stay one flat file each.
  std::string path_of(const std::string& key) const;

 private:
  // Writes value to a new temporary file in the directory and returns its
  // path; readers never see a half-written value because the temporary file
  // becomes the key's file by rename (set) or link (add) only once complete.
  std::string write_temporary(const std::string& value) const;
  std::string dir_;
};

// Checks that dir (which must exist) is a directory owned by this user (or
// root) that nobody else may write to; throws DDPH_INVALID_ARGUMENT saying which and
// how to fix it.
void check_private_directory(const std::string& dir);

}  // namespace rendezvous
}  // namespace ddph
