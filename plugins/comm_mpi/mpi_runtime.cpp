#include "plugins/comm_mpi/mpi_runtime.h"

#include <dlfcn.h>
#include <mpi.h>

#include <cstdlib>
#include <mutex>

#include "core/base/error.h"
#include "core/base/host.h"
#include "plugins/comm_mpi/mpi_check.h"

namespace ddph {
namespace comm_mpi {
namespace {

std::mutex g_mutex;
bool g_we_initialized = false;
bool g_host_multiple = false;

void finalize_at_exit() {
  int finalized = 1;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
}

// The loader opens plugins RTLD_LOCAL. Open MPI loads its own components
// with dlopen and they expect libmpi's symbols in the global scope, as a
// program linked against libmpi has them; promote the copy already loaded.
void make_libmpi_global() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

// The exit handler lives in this shared object: it must stay mapped after
// the loader unloads the plugin, or exit would jump into unmapped code (and
// glibc would run the handler at dlclose, finalizing MPI while the process
// may still want it).
void pin_this_plugin() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&finalize_at_exit), &info) != 0 && info.dli_fname != nullptr)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown MPI thread level";
}

bool mpi_finalized() {
  int finalized = 0;
  return MPI_Finalized(&finalized) == MPI_SUCCESS && finalized != 0;
}

void ensure_mpi() {
  std::lock_guard<std::mutex> lock(g_mutex);
  DDPH_CHECK(!mpi_finalized(), DDPH_UNSUPPORTED,
             "comm_mpi create: MPI has already been finalized in this process; MPI cannot be "
             "initialized twice, so open every MPI session before MPI_Finalize");
  int initialized = 0;
  MPICHECK(MPI_Initialized(&initialized), "comm_mpi create");
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPICHECK(MPI_Query_thread(&provided), "comm_mpi create");
    DDPH_CHECK(provided >= MPI_THREAD_SERIALIZED, DDPH_UNSUPPORTED,
               "comm_mpi create: the host initialized MPI with "
                   << thread_level_name(provided)
                   << ", but ddphooks calls MPI from its worker thread and needs at least "
                      "MPI_THREAD_SERIALIZED; initialize MPI with MPI_Init_thread("
                      "MPI_THREAD_MULTIPLE) (or SERIALIZED if the host never calls MPI while a "
                      "bucket is in flight)");
    g_host_multiple = provided >= MPI_THREAD_MULTIPLE;
    return;
  }
  make_libmpi_global();
  // MPI_Init_thread's failure is fatal by default (MPI_ERRORS_ARE_FATAL is
  // all there is before init); its return code is checked all the same.
  MPICHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
           "comm_mpi create: initializing MPI");
  g_we_initialized = true;
  pin_this_plugin();
  std::atexit(&finalize_at_exit);
  DDPH_CHECK(provided >= MPI_THREAD_SERIALIZED, DDPH_UNSUPPORTED,
             "comm_mpi create: MPI_Init_thread provided only "
                 << thread_level_name(provided)
                 << "; ddphooks calls MPI from its worker thread and needs at least "
                    "MPI_THREAD_SERIALIZED (build or configure the MPI library with thread "
                    "support)");
  if (provided < MPI_THREAD_MULTIPLE)
    log(DDPH_LOG_INFO, "comm_mpi",
        std::string("MPI provides ") + thread_level_name(provided) +
            "; the host must not call MPI while ddphooks runs a collective");
}

bool plugin_initialized_mpi() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_we_initialized;
}

bool host_may_call_mpi_concurrently() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_host_multiple;
}

}  // namespace comm_mpi
}  // namespace ddph
