// A job whose communicator is MPI runs one process per rank under mpirun
// (or another MPI launcher): `ddph train` and `ddph bench` then are one rank
// each, with rank and world from the launcher, instead of forking local ranks.
#pragma once

#include <string>

namespace ddph_tool {

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

}  // namespace ddph_tool
