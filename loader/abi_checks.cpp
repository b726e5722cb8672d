// Compile-time checks of the v1.0 ABI layout, built into libddph.so so that a
// change to ddph.h that moves a field breaks the build instead of plugins.
#include <ddph/ddph.h>

static_assert(DDPH_ABI_MAJOR == 1, "libddph.so implements ABI major 1");
static_assert(offsetof(ddph_plugin_t, struct_size) == 0, "struct_size must come first");
static_assert(offsetof(ddph_hook_t, struct_size) == 0, "struct_size must come first");
static_assert(offsetof(ddph_bucket_t, struct_size) == 0, "struct_size must come first");
static_assert(DDPH_PLUGIN_SIZE_V1_0 == sizeof(ddph_plugin_t), "v1.0 plugin struct is complete");
static_assert(DDPH_HOST_SIZE_V1_7 == sizeof(ddph_host_t) &&
                  DDPH_HOST_SIZE_V1_7 == DDPH_HOST_SIZE_V1_0 + sizeof(void*),
              "1.7 appends span to ddph_host_t");
// 1.1 to 1.5 appended fields; the older sizes stay where plugins saw them.
static_assert(DDPH_COMM_SIZE_V1_1 == DDPH_COMM_SIZE_V1_0 + sizeof(void*),
              "1.1 appends alltoallv to ddph_comm_t");
static_assert(DDPH_COMM_SIZE_V1_2 == sizeof(ddph_comm_t) &&
                  DDPH_COMM_SIZE_V1_2 == DDPH_COMM_SIZE_V1_1 + sizeof(void*),
              "1.2 appends bytes_sent_to to ddph_comm_t");
static_assert(DDPH_HOOK_INIT_SIZE_V1_2 == DDPH_HOOK_INIT_SIZE_V1_0 + 2 * sizeof(void*),
              "1.2 appends make_inner and inner_ctx to ddph_hook_init_t");
static_assert(DDPH_HOOK_INIT_SIZE_V1_3 == sizeof(ddph_hook_init_t) &&
                  DDPH_HOOK_INIT_SIZE_V1_3 == DDPH_HOOK_INIT_SIZE_V1_2 + sizeof(void*),
              "1.3 appends device_allocator to ddph_hook_init_t");
static_assert(DDPH_COMM_INIT_SIZE_V1_3 == sizeof(ddph_comm_init_t) &&
                  DDPH_COMM_INIT_SIZE_V1_3 == DDPH_COMM_INIT_SIZE_V1_0 + sizeof(void*),
              "1.3 appends device_allocator to ddph_comm_init_t");
static_assert(DDPH_SESSION_OPTIONS_SIZE_V1_3 == DDPH_SESSION_OPTIONS_SIZE_V1_0 + sizeof(void*),
              "1.3 appends device_allocator to ddph_session_options_t");
static_assert(DDPH_SESSION_OPTIONS_SIZE_V1_4 == sizeof(ddph_session_options_t) &&
                  DDPH_SESSION_OPTIONS_SIZE_V1_4 == DDPH_SESSION_OPTIONS_SIZE_V1_3 + sizeof(void*),
              "1.4 appends job to ddph_session_options_t");
static_assert(DDPH_STORE_SIZE_V1_4 == sizeof(ddph_store_t) &&
                  DDPH_STORE_SIZE_V1_4 == DDPH_STORE_SIZE_V1_0 + sizeof(void*),
              "1.4 appends del to ddph_store_t");
static_assert(DDPH_DEVICE_ALLOCATOR_SIZE_V1_3 == sizeof(ddph_device_allocator_t),
              "the 1.3 allocator table is complete");
static_assert(offsetof(ddph_bucket_metrics_t, struct_size) == 0 &&
                  offsetof(ddph_bucket_metrics_t, start_ns) - DDPH_BUCKET_METRICS_SIZE_V1_5 <
                      alignof(ddph_bucket_metrics_t),
              "1.7 appends start_ns to the 1.5 metrics record");
static_assert(DDPH_BUCKET_METRICS_SIZE_V1_10 == sizeof(ddph_bucket_metrics_t) &&
                  offsetof(ddph_bucket_metrics_t, candidate) == DDPH_BUCKET_METRICS_SIZE_V1_7 &&
                  DDPH_BUCKET_METRICS_SIZE_V1_10 ==
                      DDPH_BUCKET_METRICS_SIZE_V1_7 + 2 * sizeof(int32_t),
              "1.10 appends candidate and choice_reason to the 1.7 metrics record");
static_assert(DDPH_HOOK_SIZE_V1_5 == DDPH_HOOK_SIZE_V1_0 + sizeof(void*),
              "1.5 appends check to ddph_hook_t");
static_assert(DDPH_HOOK_SIZE_V1_9 == DDPH_HOOK_SIZE_V1_5 + sizeof(void*),
              "1.9 appends state_flags to ddph_hook_t");
static_assert(DDPH_HOOK_SIZE_V1_10 == sizeof(ddph_hook_t) &&
                  DDPH_HOOK_SIZE_V1_10 == DDPH_HOOK_SIZE_V1_9 + sizeof(void*),
              "1.10 appends take_residual to ddph_hook_t");
static_assert(DDPH_COMM_FACTORY_SIZE_V1_5 == sizeof(ddph_comm_factory_t) &&
                  DDPH_COMM_FACTORY_SIZE_V1_5 == DDPH_COMM_FACTORY_SIZE_V1_0 + sizeof(void*),
              "1.5 appends check to ddph_comm_factory_t");
static_assert(offsetof(ddph_check_t, struct_size) == 0, "struct_size must come first");
static_assert(DDPH_CHECK_SIZE_V1_5 <= sizeof(ddph_check_t), "the 1.5 check struct is complete");
static_assert(offsetof(ddph_span_t, struct_size) == 0 && DDPH_SPAN_SIZE_V1_7 == sizeof(ddph_span_t),
              "the 1.7 span record is complete");
