#include "loader/session/rendezvous.h"

#include <chrono>
#include <string>

#include "core/base/error.h"
#include "core/base/host.h"
#include "core/comm/rendezvous/kv_store.h"
#include "core/comm/rendezvous_url.h"
#include "loader/job/job_id.h"
#include "loader/job/job_secret.h"
#include "loader/log_sink.h"

namespace ddph {
namespace loader {

std::unique_ptr<JobStore> open_job_store(const ddph_session_options_t& opts, const CommSpec& spec,
                                         const Placement& placement) {
  const std::string url = opts.rendezvous != nullptr ? opts.rendezvous : spec.rendezvous;
  const std::chrono::milliseconds timeout(spec.timeout_ms);
  const char* host_job = opts.struct_size >= DDPH_SESSION_OPTIONS_SIZE_V1_4 ? opts.job : nullptr;
  const JobId job = resolve_job_id(host_job, spec.job);
  JobRun run;
  run.job = job.id;
  run.job_source = job.source;
  run.rank = placement.rank;
  run.world = placement.world_size;
  run.timeout = timeout;
  run.secret = load_job_secret(spec.secret_file).bytes;
  std::unique_ptr<rendezvous::KvStore> kv;
  if (url.empty() || url == "host") {
    DDPH_CHECK(url.empty() || opts.store != nullptr, DDPH_INVALID_ARGUMENT,
               "comm.rendezvous is 'host' but the host lent no store "
               "(ddph_session_options.store is NULL)");
    if (opts.store == nullptr) return nullptr;
    kv = rendezvous::host_store(opts.store);
  } else {
    // The YAML's value was checked with the config; this one is the host's
    // (ddph train --rendezvous, Session(rendezvous=...)).
    DDPH_CHECK(is_rendezvous_url(url), DDPH_INVALID_ARGUMENT,
               "the rendezvous '" << url
                                  << "' the program gave (it overrides comm.rendezvous) is not "
                                     "file:///dir, redis://host:port, tcp://host:port, env:// or "
                                     "host");
    // A tcp:// store (rank 0's) admits only this job's ranks, and with a
    // secret only those that prove they hold it, at connect.
    rendezvous::StoreAccess access;
    access.job = run.job;
    if (!run.secret.empty())
      access.sign = [secret = run.secret](const std::string& data) {
        return hmac_sha256(secret, data);
      };
    // Keys of a run that crashed expire in Redis once no rank of it can
    // still be waiting for them.
    kv = rendezvous::open_url_store(url, placement.rank, 2 * timeout + std::chrono::seconds(60),
                                    access);
  }
  log(DDPH_LOG_INFO, "loader",
      "job '" + job.id + "' (from " + job.source + "): rank " + std::to_string(run.rank) + " of " +
          std::to_string(run.world) + " through " + kv->describe() +
          (run.secret.empty() ? "" : ", values signed with the job's secret"));
  return std::make_unique<JobStore>(std::move(kv), std::move(run));
}

}  // namespace loader
}  // namespace ddph
