#include "loader/job/job_secret.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/base/error.h"

namespace ddph {
namespace loader {
namespace {

constexpr size_t kMaxSecretBytes = 4096;

std::string read_secret_file(const std::string& path, const std::string& source) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  DDPH_CHECK(fd >= 0, DDPH_INVALID_ARGUMENT,
             source << ": cannot open the secret file: " << strerror(errno));
  struct stat st {};
  const bool stat_ok = fstat(fd, &st) == 0;
  std::string problem;
  if (!stat_ok) {
    problem = std::string("cannot stat it: ") + strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "it is not a regular file";
  } else if (st.st_uid != geteuid()) {
    problem = "it belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
              std::to_string(geteuid()) + ")";
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    problem = std::string("its mode is ") + mode + ": other users may read it (run `chmod 600 " +
              path + "`)";
  } else if (st.st_size <= 0 || size_t(st.st_size) > kMaxSecretBytes) {
    problem = "it holds " + std::to_string(st.st_size) + " bytes; a secret is 1 to " +
              std::to_string(kMaxSecretBytes) + " bytes";
  }
  std::string secret;
  if (problem.empty()) {
    secret.resize(size_t(st.st_size));
    size_t done = 0;
    while (done < secret.size()) {
      ssize_t n = read(fd, &secret[done], secret.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += size_t(n);
    }
    if (done != secret.size()) problem = "it could not be read whole";
  }
  close(fd);
  DDPH_CHECK(problem.empty(), DDPH_INVALID_ARGUMENT, source << ": " << problem);
  return secret;
}

}  // namespace

JobSecret load_job_secret(const std::string& from_yaml) {
  JobSecret secret;
  std::string path;
  if (!from_yaml.empty()) {
    path = from_yaml;
    secret.source = "comm.secret_file '" + path + "'";
  } else if (const char* env = std::getenv("DDPH_JOB_SECRET_FILE"); env != nullptr && *env) {
    path = env;
    secret.source = "DDPH_JOB_SECRET_FILE '" + path + "'";
  } else {
    return secret;
  }
  secret.bytes = read_secret_file(path, secret.source);
  return secret;
}

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const unsigned char* done =
      HMAC(EVP_sha256(), key.data(), int(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  DDPH_CHECK(done != nullptr && n == 32, DDPH_INTERNAL, "HMAC-SHA256 failed (OpenSSL)");
  return std::string(reinterpret_cast<const char*>(out), n);
}

bool equal_in_constant_time(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace loader
}  // namespace ddph
