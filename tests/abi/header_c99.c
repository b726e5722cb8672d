/* The ABI header must compile as strict C99 on its own. */
#include <ddph/ddph.h>

/* The current version's sizes equal today's structs (1.1 appended to
 * ddph_comm_t; 1.2 to ddph_comm_t, ddph_hook_init_t and ddph_bucket_t; 1.3
 * to ddph_comm_init_t, ddph_hook_init_t and ddph_session_options_t; 1.4 to
 * ddph_store_t and ddph_session_options_t; 1.5 check to ddph_hook_t and
 * ddph_comm_factory_t; 1.7 span to ddph_host_t, and ddph_span_t; 1.8
 * params_checked to ddph_bucket_t, whose padding follows it; 1.9
 * state_flags to ddph_hook_t; 1.10 take_residual to ddph_hook_t, and
 * candidate and choice_reason to ddph_bucket_metrics_t). */
typedef char store_size_ok[DDPH_STORE_SIZE_V1_4 == sizeof(ddph_store_t) ? 1 : -1];
typedef char host_size_ok[DDPH_HOST_SIZE_V1_7 == sizeof(ddph_host_t) ? 1 : -1];
typedef char span_size_ok[DDPH_SPAN_SIZE_V1_7 == sizeof(ddph_span_t) ? 1 : -1];
typedef char comm_size_ok[DDPH_COMM_SIZE_V1_2 == sizeof(ddph_comm_t) ? 1 : -1];
typedef char hook_init_size_ok[DDPH_HOOK_INIT_SIZE_V1_3 == sizeof(ddph_hook_init_t) ? 1 : -1];
typedef char comm_init_size_ok[DDPH_COMM_INIT_SIZE_V1_3 == sizeof(ddph_comm_init_t) ? 1 : -1];
typedef char options_size_ok[DDPH_SESSION_OPTIONS_SIZE_V1_4 == sizeof(ddph_session_options_t) ? 1 : -1];
typedef char allocator_size_ok[DDPH_DEVICE_ALLOCATOR_SIZE_V1_3 == sizeof(ddph_device_allocator_t) ? 1 : -1];
typedef char bucket_size_ok[sizeof(ddph_bucket_t) - DDPH_BUCKET_SIZE_V1_8 < sizeof(void *) ? 1 : -1];
typedef char hook_size_ok[DDPH_HOOK_SIZE_V1_10 == sizeof(ddph_hook_t) ? 1 : -1];
typedef char metrics_size_ok[DDPH_BUCKET_METRICS_SIZE_V1_10 == sizeof(ddph_bucket_metrics_t) ? 1 : -1];
typedef char comm_factory_size_ok[DDPH_COMM_FACTORY_SIZE_V1_5 == sizeof(ddph_comm_factory_t) ? 1 : -1];
typedef char plugin_size_ok[DDPH_PLUGIN_SIZE_V1_0 == sizeof(ddph_plugin_t) ? 1 : -1];

int ddph_header_c99_compiles(void) {
  return DDPH_ABI_MAJOR;
}
