// Where the ranks of `ddph train`, `ddph bench` and `ddph lab` come from:
// forked here as separate processes (before the parent makes any thread),
// waited for with a deadline, stragglers killed so that a dead peer never
// hangs the tool; or, for a job whose communicator is MPI, one process per
// rank under mpirun (or another MPI launcher), with rank and world from the
// launcher. Also the temporary directory a local launch's file store lives
// in, which never outlives the launch (ScratchDir).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace ddph::tool {

struct RankExit {
  int rank = 0;
  bool exited = false;  // false: ended by a signal
  int code = -1;        // exit code when exited
  int signal = 0;
  bool killed = false;  // we killed it: past the deadline or after a peer failed
  double seconds = 0;   // wall time from its fork to its end (to within 20 ms)
  bool ok() const { return exited && code == 0; }
  std::string describe() const;
};

// Forks `world` children; child r runs body(r) and exits with its return
// value (or never returns, if body execs). Waits at most timeout_s in all;
// once one rank fails, the others get grace_s to finish (they are likely
// blocked on the dead peer) before being killed. A rank dies with this
// process, however it ends (PR_SET_PDEATHSIG).
//
// SIGINT, SIGTERM and SIGHUP stop the launch rather than this process: from
// the first call on they are caught, each running rank gets the same signal
// and, 2 s later, SIGKILL, and this returns once all are reaped, so that the
// caller can clean up and then call end_if_stopped(). One this process was
// started with ignored (nohup's SIGHUP) stays ignored, in the ranks too.
std::vector<RankExit> run_local_ranks(int world, const std::function<int(int rank)>& body,
                                      double timeout_s, double grace_s);

// After the caller's cleanup: if SIGINT, SIGTERM or SIGHUP came while the
// ranks ran (or since), says so as "<tool>: stopped by SIGTERM ..." and ends
// this process by that signal, as it would have ended without the cleanup
// (a shell sees 128 + its number). Returns when none came.
void end_if_stopped(const char* tool);

// Prints every failed rank to stderr as "<tool>: rank R ..."; true if all passed.
bool report_ranks(const char* tool, const std::vector<RankExit>& exits);

// The flags of one rank of a job started by hand (`--rank R`, -1: not
// given; `--rendezvous`) against a local launch's: the rank below world,
// --rendezvous only with --rank (and, with rendezvous_required, --rank
// only with it), no --link (link: given) with --rank. Throws
// std::invalid_argument naming the flags.
void check_rank_flags(int rank, int world, const std::string& rendezvous, bool link,
                      bool rendezvous_required);

struct LauncherPlacement {
  bool found = false;  // the config's backend is mpi and a launcher set the variables
  int rank = 0;
  int world = 1;
};

// Reads Open MPI's OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, else
// PMI_RANK/PMI_SIZE (MPICH's Hydra, Intel MPI, Slurm's PMI), when
// config_path's comm.backend is "mpi". Throws std::runtime_error for a
// variable that is set but malformed.
LauncherPlacement mpi_launcher_placement(const std::string& config_path);
// The same for the configs of one launch, which must all be placed by the
// launcher or none; with link (--link, local ranks on shaped links) an MPI
// placement is refused. Throws std::runtime_error naming the config or flag.
LauncherPlacement mpi_launcher_placement(const std::vector<std::string>& configs, bool link);

// A fresh private directory under $TMPDIR (or /tmp), for a file store.
std::string make_temp_dir(const char* tag);
// Removes dir and everything in it; errors are ignored (it is scratch).
void remove_tree(const std::string& dir);

// A local launch's temporary directory (its file store) that never outlives
// the launch. The destructor, or remove(), removes it. When this process
// cannot run either (SIGKILL, a crash), a watcher process does: it holds the
// read end of a pipe whose write end this process and every rank it starts
// inherit (on purpose not close-on-exec), so it reads end-of-file only once
// the launcher and all its ranks are gone, whatever ended them; it then
// removes the directory and exits. It ignores SIGINT, SIGTERM and SIGHUP
// and sits in a session of its own, so that what stops the launch does not
// stop the cleanup. Make it before any thread and before the ranks.
class ScratchDir {
 public:
  // Throws std::runtime_error when the directory, the pipe or the watcher
  // cannot be made (nothing is left behind then).
  explicit ScratchDir(const char* tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Removes the directory now (the watcher still ends with the launch).
  void remove();

 private:
  std::string path_;
  bool removed_ = false;
  int hold_fd_ = -1;  // the pipe's write end
  pid_t watcher_ = -1;
  pid_t owner_ = -1;  // the launcher; a forked copy removes nothing
};

}  // namespace ddph::tool
