/* The ABI's whole type surface as one exported function, so that abidw
 * records every public struct and enum layout. Built against the current
 * header and compared by abidiff with the committed baseline, the dump of
 * this file built against the frozen 1.0 header (abi_stability.sh). */
#include <ddph/ddph.h>

DDPH_EXPORT void ddph_abi_surface(const ddph_host_t *host, const ddph_store_t *store,
                                  const ddph_option_spec_t *spec, const ddph_option_t *option,
                                  const ddph_comm_t *comm, const ddph_comm_init_t *comm_init,
                                  const ddph_comm_factory_t *factory, const ddph_param_t *param,
                                  const ddph_bucket_t *bucket, const ddph_stats_t *stats,
                                  const ddph_hook_ref_t *ref, const ddph_hook_init_t *hook_init,
                                  const ddph_hook_t *hook, const ddph_plugin_t *plugin,
                                  const ddph_session_options_t *session, ddph_code_t code,
                                  ddph_log_level_t level, ddph_type_t type, ddph_reduce_op_t op) {
  (void)host, (void)store, (void)spec, (void)option, (void)comm, (void)comm_init, (void)factory;
  (void)param, (void)bucket, (void)stats, (void)ref, (void)hook_init, (void)hook, (void)plugin;
  (void)session, (void)code, (void)level, (void)type, (void)op;
}
