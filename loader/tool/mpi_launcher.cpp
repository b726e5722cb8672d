#include "loader/tool/mpi_launcher.h"

#include <cstdlib>
#include <stdexcept>

#include "loader/config.h"

namespace ddph_tool {
namespace {

bool read_int(const char* name, int min, int* out) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < min || v > 1 << 20)
    throw std::runtime_error(std::string("the MPI launcher's ") + name + " is '" + text +
                             "', not a rank count");
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

LauncherPlacement mpi_launcher_placement(const std::string& config_path) {
  LauncherPlacement p;
  ddph::loader::Problems problems;  // the session reports them; only the backend matters here
  const ddph::loader::Config config = ddph::loader::parse_config_file(config_path, problems);
  if (config.comm.backend != "mpi") return p;
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& names : pairs) {
    int rank = 0, world = 0;
    if (!read_int(names[0], 0, &rank)) continue;
    if (!read_int(names[1], 1, &world))
      throw std::runtime_error(std::string(names[0]) + " is set but " + names[1] + " is not");
    if (rank >= world)
      throw std::runtime_error(std::string("the MPI launcher's ") + names[0] + " " +
                               std::to_string(rank) + " is not below " + names[1] + " " +
                               std::to_string(world));
    p.found = true;
    p.rank = rank;
    p.world = world;
    return p;
  }
  return p;
}

}  // namespace ddph_tool
