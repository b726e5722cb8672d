// Pins the v1 layout: a change here is an ABI break and must bump the major.
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <cstddef>

extern "C" int ddph_header_c99_compiles(void);

namespace {

TEST(AbiLayout, HeaderCompilesAsC99) {
  EXPECT_EQ(ddph_header_c99_compiles(), 1);
}

TEST(AbiLayout, StructSizeComesFirstEverywhere) {
  EXPECT_EQ(offsetof(ddph_store_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_host_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_option_spec_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_option_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_comm_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_comm_init_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_comm_factory_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_param_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_bucket_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_stats_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_hook_init_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_hook_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_plugin_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_session_options_t, struct_size), 0u);
}

// x86-64 / aarch64 LP64 sizes of v1.0. Appending a field changes sizeof but
// not the V1_0 macros; changing these numbers otherwise breaks every plugin.
TEST(AbiLayout, V1SizesOnLp64) {
  static_assert(sizeof(void*) == 8, "LP64 only");
  EXPECT_EQ(DDPH_STORE_SIZE_V1_0, 32u);
  EXPECT_EQ(DDPH_HOST_SIZE_V1_0, 56u);
  EXPECT_EQ(DDPH_COMM_SIZE_V1_0, 112u);
  EXPECT_EQ(DDPH_BUCKET_SIZE_V1_0, 104u);
  EXPECT_EQ(DDPH_HOOK_SIZE_V1_0, 96u);
  EXPECT_EQ(DDPH_PLUGIN_SIZE_V1_0, 64u);
  EXPECT_EQ(sizeof(DLTensor), 48u);
}

// 1.1 appended alltoallv to ddph_comm_t, right after the v1.0 fields.
TEST(AbiLayout, V1_1AppendsOnly) {
  EXPECT_EQ(offsetof(ddph_comm_t, alltoallv), DDPH_COMM_SIZE_V1_0);
  EXPECT_EQ(DDPH_COMM_SIZE_V1_1, 120u);
}

// 1.2 appended bytes_sent_to to ddph_comm_t, make_inner + inner_ctx to
// ddph_hook_init_t and param_ids to ddph_bucket_t, each right after the
// fields of the version before.
TEST(AbiLayout, V1_2AppendsOnly) {
  EXPECT_EQ(offsetof(ddph_comm_t, bytes_sent_to), DDPH_COMM_SIZE_V1_1);
  EXPECT_EQ(DDPH_COMM_SIZE_V1_2, 128u);
  EXPECT_EQ(DDPH_HOOK_INIT_SIZE_V1_0, 48u);
  EXPECT_EQ(offsetof(ddph_hook_init_t, make_inner), DDPH_HOOK_INIT_SIZE_V1_0);
  EXPECT_EQ(DDPH_HOOK_INIT_SIZE_V1_2, 64u);
  EXPECT_EQ(offsetof(ddph_bucket_t, param_ids), DDPH_BUCKET_SIZE_V1_0);
  EXPECT_EQ(DDPH_BUCKET_SIZE_V1_2, 112u);
  EXPECT_EQ(DDPH_HOOK_MAKES_INNER & (DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS |
                                     DDPH_HOOK_RESULT_ELSEWHERE | DDPH_HOOK_STEPS_OPTIMIZER),
            0u);
}

// 1.3 appended device_allocator to ddph_comm_init_t, ddph_hook_init_t and
// ddph_session_options_t, each right after the fields of the version
// before, and added the allocator table.
TEST(AbiLayout, V1_3AppendsOnly) {
  EXPECT_EQ(offsetof(ddph_comm_init_t, device_allocator), DDPH_COMM_INIT_SIZE_V1_0);
  EXPECT_EQ(DDPH_COMM_INIT_SIZE_V1_0, 72u);
  EXPECT_EQ(DDPH_COMM_INIT_SIZE_V1_3, 80u);
  EXPECT_EQ(offsetof(ddph_hook_init_t, device_allocator), DDPH_HOOK_INIT_SIZE_V1_2);
  EXPECT_EQ(DDPH_HOOK_INIT_SIZE_V1_3, 72u);
  EXPECT_EQ(offsetof(ddph_session_options_t, device_allocator), DDPH_SESSION_OPTIONS_SIZE_V1_0);
  EXPECT_EQ(DDPH_SESSION_OPTIONS_SIZE_V1_0, 56u);
  EXPECT_EQ(DDPH_SESSION_OPTIONS_SIZE_V1_3, 64u);
  EXPECT_EQ(offsetof(ddph_device_allocator_t, struct_size), 0u);
  EXPECT_EQ(DDPH_DEVICE_ALLOCATOR_SIZE_V1_3, 32u);
}

// 1.4 appended del to ddph_store_t and job to ddph_session_options_t.
TEST(AbiLayout, V1_4AppendsOnly) {
  EXPECT_EQ(offsetof(ddph_store_t, del), DDPH_STORE_SIZE_V1_0);
  EXPECT_EQ(DDPH_STORE_SIZE_V1_0, 32u);
  EXPECT_EQ(DDPH_STORE_SIZE_V1_4, 40u);
  EXPECT_EQ(offsetof(ddph_session_options_t, job), DDPH_SESSION_OPTIONS_SIZE_V1_3);
  EXPECT_EQ(DDPH_SESSION_OPTIONS_SIZE_V1_4, 72u);
}

// 1.5 added the per-bucket metrics record (ddph_session_take_metrics).
TEST(AbiLayout, V1_5BucketMetrics) {
  EXPECT_EQ(offsetof(ddph_bucket_metrics_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_bucket_metrics_t, bucket), 16u);
  EXPECT_EQ(offsetof(ddph_bucket_metrics_t, bytes_in), 24u);
  EXPECT_EQ(offsetof(ddph_bucket_metrics_t, queue_seconds), 48u);
  EXPECT_EQ(DDPH_BUCKET_METRICS_SIZE_V1_5, 68u);
}

// 1.5 appended check to ddph_hook_t and ddph_comm_factory_t, and added
// ddph_check_t, which check() receives.
TEST(AbiLayout, V1_5AppendsCheck) {
  EXPECT_EQ(offsetof(ddph_hook_t, check), DDPH_HOOK_SIZE_V1_0);
  EXPECT_EQ(DDPH_HOOK_SIZE_V1_5, 104u);
  EXPECT_EQ(DDPH_COMM_FACTORY_SIZE_V1_0, 48u);
  // 1.9 appended state_flags after it.
  EXPECT_EQ(offsetof(ddph_hook_t, state_flags), DDPH_HOOK_SIZE_V1_5);
  EXPECT_EQ(DDPH_HOOK_SIZE_V1_9, 112u);
  EXPECT_EQ(offsetof(ddph_comm_factory_t, check), DDPH_COMM_FACTORY_SIZE_V1_0);
  EXPECT_EQ(DDPH_COMM_FACTORY_SIZE_V1_5, 56u);
  EXPECT_EQ(offsetof(ddph_check_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_check_t, bucket_dtype), 32u);
  EXPECT_EQ(offsetof(ddph_check_t, bad_option), 40u);
  EXPECT_EQ(offsetof(ddph_check_t, inner_bucket_dtype), 48u);
  EXPECT_EQ(DDPH_CHECK_SIZE_V1_5, 52u);
}

}  // namespace

// 1.6 added the hook flag DDPH_HOOK_PIPELINED, a bit of its own: a 1.5
// loader reading a 1.6 table sees none of the flags it knows change.
TEST(AbiLayout, V1_6AddsAFlagOnly) {
  EXPECT_EQ(DDPH_HOOK_PIPELINED, 0x20u);
  EXPECT_EQ(DDPH_HOOK_PIPELINED &
                (DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS | DDPH_HOOK_RESULT_ELSEWHERE |
                 DDPH_HOOK_STEPS_OPTIMIZER | DDPH_HOOK_MAKES_INNER),
            0u);
}

// 1.7 appended span to ddph_host_t and start_ns to the metrics record, and
// added the phase enum and the span record (ddph_session_take_spans).
TEST(AbiLayout, V1_7AppendsSpan) {
  EXPECT_EQ(offsetof(ddph_host_t, span), DDPH_HOST_SIZE_V1_0);
  EXPECT_EQ(DDPH_HOST_SIZE_V1_7, 64u);
  EXPECT_EQ(offsetof(ddph_span_t, struct_size), 0u);
  EXPECT_EQ(offsetof(ddph_span_t, step), 8u);
  EXPECT_EQ(offsetof(ddph_span_t, bucket), 16u);
  EXPECT_EQ(offsetof(ddph_span_t, phase), 20u);
  EXPECT_EQ(offsetof(ddph_span_t, start_ns), 24u);
  EXPECT_EQ(DDPH_SPAN_SIZE_V1_7, 40u);
  EXPECT_EQ(offsetof(ddph_bucket_metrics_t, start_ns), 72u);  // after the 1.5 record's padding
  EXPECT_EQ(DDPH_BUCKET_METRICS_SIZE_V1_5, 68u);
  EXPECT_EQ(DDPH_BUCKET_METRICS_SIZE_V1_7, 80u);
  EXPECT_EQ(DDPH_PHASE_COMPRESS, 0);
  EXPECT_EQ(DDPH_PHASE_COLLECTIVE, 1);
  EXPECT_EQ(DDPH_PHASE_DECOMPRESS, 2);
  EXPECT_EQ(DDPH_PHASE_OPTIMIZER_STEP, 3);
}

// 1.8 appended params_checked to ddph_bucket_t, after 1.2's param_ids.
TEST(AbiLayout, V1_8AppendsParamsChecked) {
  EXPECT_EQ(offsetof(ddph_bucket_t, params_checked), DDPH_BUCKET_SIZE_V1_2);
  EXPECT_EQ(DDPH_BUCKET_SIZE_V1_8, 116u);
  EXPECT_EQ(sizeof(ddph_bucket_t), 120u);
}

// 1.10 appended take_residual to ddph_hook_t, after 1.9's state_flags, and
// candidate and choice_reason to the metrics record, after 1.7's start_ns.
TEST(AbiLayout, V1_10AppendsTakeResidualAndTheChoice) {
  EXPECT_EQ(offsetof(ddph_hook_t, take_residual), DDPH_HOOK_SIZE_V1_9);
  EXPECT_EQ(DDPH_HOOK_SIZE_V1_10, 120u);
  EXPECT_EQ(sizeof(ddph_hook_t), 120u);
  EXPECT_EQ(offsetof(ddph_bucket_metrics_t, candidate), DDPH_BUCKET_METRICS_SIZE_V1_7);
  EXPECT_EQ(offsetof(ddph_bucket_metrics_t, choice_reason), 84u);
  EXPECT_EQ(DDPH_BUCKET_METRICS_SIZE_V1_10, 88u);
  EXPECT_EQ(sizeof(ddph_bucket_metrics_t), 88u);
  EXPECT_EQ(DDPH_CHOICE_FIXED, 0);
  EXPECT_EQ(DDPH_CHOICE_WARMUP, 1);
  EXPECT_EQ(DDPH_CHOICE_EXPLORE, 2);
  EXPECT_EQ(DDPH_CHOICE_FASTEST, 3);
  EXPECT_EQ(DDPH_CHOICE_CRITICAL, 4);
  EXPECT_EQ(DDPH_CHOICE_MODEL, 5);
}

TEST(AbiLayout, CurrentMinorIs1_10) {
  EXPECT_EQ(DDPH_ABI_MINOR, 10);
}
