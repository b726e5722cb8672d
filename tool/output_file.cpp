#include "tool/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddph::tool {
namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The reason open(2) gave, and what the folder has to do with it.
std::string why_not_created(const std::string& path, int err) {
  std::string why = std::strerror(err);
  const std::string folder = folder_of(path);
  struct stat st {};
  if (err == ENOENT && stat(folder.c_str(), &st) != 0)
    why += " (the folder " + folder + " does not exist)";
  else if (err == ENOTDIR)
    why += " (" + folder + " is not a folder)";
  return why;
}

}  // namespace

OutputFile::OutputFile(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)) {
  if (path_.empty()) throw std::runtime_error(what_ + ": no file name given");
  do {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0)
    throw std::runtime_error(what_ + ": cannot create " + path_ + ": " +
                             why_not_created(path_, errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const std::string& text) {
  if (fd_ < 0) throw std::logic_error(what_ + ": " + path_ + " is closed");
  pending_ += text;
}

void OutputFile::flush() {
  size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      pending_.erase(0, done);
      throw std::runtime_error(what_ + ": cannot write " + path_ + ": " + std::strerror(err));
    }
    done += size_t(n);
  }
  pending_.clear();
}

void OutputFile::close() {
  if (fd_ < 0) return;
  flush();
  const int fd = fd_;
  fd_ = -1;
  // Not retried on EINTR: Linux has released the descriptor either way.
  if (::close(fd) != 0)
    throw std::runtime_error(what_ + ": cannot write " + path_ + ": " + std::strerror(errno));
}

void write_output_file(const std::string& path, const std::string& text, const std::string& what) {
  OutputFile f(path, what);
  f.write(text);
  f.close();
}

}  // namespace ddph::tool
