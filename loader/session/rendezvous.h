// The job-scoped store a session's communicator rendezvouses through.
#pragma once

#include <ddph/ddph.h>

#include <memory>

#include "loader/job/config.h"
#include "loader/job/job_store.h"
#include "loader/session/placement.h"

namespace ddph {
namespace loader {

// The URL's store (options, then YAML) or the host's; NULL when there is
// neither (a world of one then meets nobody: its communicator keeps a
// store in memory).
std::unique_ptr<JobStore> open_job_store(const ddph_session_options_t& opts, const CommSpec& spec,
                                         const Placement& placement);

}  // namespace loader
}  // namespace ddph
