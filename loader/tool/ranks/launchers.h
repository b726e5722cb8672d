// Where the ranks of `ddph train`, `ddph bench` and `ddph lab` come from:
// forked here as separate processes (before the parent makes any thread),
// waited for with a deadline, stragglers killed so that a dead peer never
// hangs the tool; or, for a job whose communicator is MPI, one process per
// rank under mpirun (or another MPI launcher), with rank and world from the
// launcher.
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
  bool ok() const { return exited && code == 0; }
  std::string describe() const;
};

// Forks `world` children; child r runs body(r) and exits with its return
// value (or never returns, if body execs). Waits at most timeout_s in all;
// once one rank fails, the others get grace_s to finish (they are likely
// blocked on the dead peer) before being killed.
std::vector<RankExit> run_local_ranks(int world, const std::function<int(int rank)>& body,
                                      double timeout_s, double grace_s);

// Prints every failed rank to stderr as "<tool>: rank R ..."; true if all passed.
bool report_ranks(const char* tool, const std::vector<RankExit>& exits);

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

// A fresh private directory under $TMPDIR (or /tmp), for a file store.
std::string make_temp_dir(const char* tag);
// Removes dir and everything in it; errors are ignored (it is scratch).
void remove_tree(const std::string& dir);

}  // namespace ddph::tool
