#include "conformance/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace ddph::plugin_checks {
namespace {

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

// The child's end of the pipe. It carries notes ('N', text, NUL) and then
// the answer ('R', status tag, detail up to EOF).
int g_child_fd = -1;

[[noreturn]] void child_main(int fd, const std::function<Outcome()>& check, bool keep_output) {
  g_child_fd = fd;
  // A sanitizer runtime turns a crash into a report and exit(1); the kernel's
  // default action lets the parent name the signal, sanitized build or not.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
  if (!keep_output) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
      close(null);
    }
  }
  Outcome o;
  try {
    o = check();
  } catch (const std::exception& e) {
    o = {Status::kFail, std::string("exception escaped into the validator: ") + e.what()};
  } catch (...) {
    o = {Status::kFail, "unknown exception escaped into the validator"};
  }
  const char tag = o.status == Status::kPass ? 'P' : o.status == Status::kSkip ? 'S' : 'F';
  write_all(fd, std::string("R") + tag + o.detail);
  close(fd);
  // _exit: the plugin's static destructors and atexit handlers are not part
  // of the check, and a hung plugin thread must not keep the child alive.
  _exit(0);
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return std::string("SIG") + (abbrev ? abbrev : std::to_string(sig).c_str()) + " (" +
         (desc ? desc : "?") + ")";
}

// Splits what the child sent into its last note and its answer (empty when
// it sent none).
void parse(const std::string& bytes, std::string* last_note, std::string* answer) {
  size_t pos = 0;
  while (pos < bytes.size() && bytes[pos] == 'N') {
    const size_t end = bytes.find('\0', pos);
    if (end == std::string::npos) break;  // cut off mid-note
    *last_note = bytes.substr(pos + 1, end - pos - 1);
    pos = end + 1;
  }
  if (pos < bytes.size() && bytes[pos] == 'R') *answer = bytes.substr(pos + 1);
}

}  // namespace

void note(const std::string& what) {
  if (g_child_fd >= 0) write_all(g_child_fd, "N" + what + std::string(1, '\0'));
}

Outcome run_isolated(const std::function<Outcome()>& check, double timeout_s, bool keep_output) {
  int fds[2];
  if (pipe(fds) != 0) return {Status::kFail, std::string("pipe: ") + std::strerror(errno)};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {Status::kFail, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], check, keep_output);
  }
  close(fds[1]);
  std::string received;
  int status = 0;
  bool exited = false, timed_out = false;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  bool pipe_open = true;
  while (!exited) {
    if (pipe_open) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        char buf[4096];
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n > 0) received.append(buf, size_t(n));
        if (n == 0) pipe_open = false;
      }
    } else {
      usleep(20 * 1000);
    }
    if (waitpid(pid, &status, WNOHANG) == pid) exited = true;
    if (!exited && std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
  }
  // The child may have written its last bytes just before exiting.
  for (char buf[4096];;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    received.append(buf, size_t(n));
  }
  close(fds[0]);
  std::string last_note, answer;
  parse(received, &last_note, &answer);
  const std::string during = last_note.empty() ? "" : " while: " + last_note;
  if (timed_out) {
    char text[64];
    std::snprintf(text, sizeof text, "hung after %.0fs", timeout_s);
    return {Status::kFail, text + during};
  }
  if (WIFSIGNALED(status))
    return {Status::kFail, "crashed: " + signal_text(WTERMSIG(status)) + during};
  if (answer.empty())
    return {Status::kFail, "the check's process exited with status " +
                               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                               " without an answer (the plugin called exit?)" + during};
  Outcome o;
  o.status = answer[0] == 'P' ? Status::kPass : answer[0] == 'S' ? Status::kSkip : Status::kFail;
  o.detail = answer.substr(1);
  return o;
}

}  // namespace ddph::plugin_checks
