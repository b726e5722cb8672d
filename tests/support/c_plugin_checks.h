/* The argument checks of the plain-C test plugins (tests/fixtures,
 * tests/hardening): what `ddph validate-plugin` expects any conforming hook
 * to refuse, in C against ddph.h only, so each fixture needs none of its own.
 * Header-only (static functions): each plugin compiles its own copy. */
#ifndef DDPH_TESTS_SUPPORT_C_PLUGIN_CHECKS_H
#define DDPH_TESTS_SUPPORT_C_PLUGIN_CHECKS_H

#include <ddph/ddph.h>
#include <stdio.h>

/* A problem found: its code and what it is (a static string), or code
 * DDPH_OK when there is none. */
typedef struct ddph_test_problem {
  ddph_code_t code;
  const char* what;
} ddph_test_problem_t;

static const ddph_test_problem_t kDdphTestNoProblem = {DDPH_OK, NULL};

static ddph_test_problem_t ddph_test_problem(ddph_code_t code, const char* what) {
  ddph_test_problem_t p = {code, what};
  return p;
}

/* "<hook>: <what>" as a host error, or NULL when there is no problem. */
static ddph_error_t* ddph_test_refuse(const ddph_host_t* host, const char* hook,
                                      ddph_test_problem_t p) {
  char message[256];
  if (p.code == DDPH_OK) return NULL;
  snprintf(message, sizeof message, "%s: %s", hook, p.what);
  return host->error_new(p.code, message);
}

/* create's init: present, large enough, with a communicator. */
static ddph_test_problem_t ddph_test_check_init(const ddph_hook_init_t* init, void** state) {
  if (init == NULL || state == NULL)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "NULL init or state pointer");
  if (init->struct_size < DDPH_HOOK_INIT_SIZE_V1_0)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "init.struct_size too small");
  if (init->comm == NULL) return ddph_test_problem(DDPH_INVALID_ARGUMENT, "init.comm is NULL");
  return kDdphTestNoProblem;
}

/* Elements of a parameter view, or -1 when a dimension is negative or the
 * product passes limit. */
static int64_t ddph_test_view_numel(const ddph_param_t* p, int64_t limit) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < p->ndim; ++d) {
    if (p->shape[d] < 0) return -1;
    if (p->shape[d] == 0) return 0;
  }
  for (d = 0; d < p->ndim; ++d) {
    if (p->shape[d] > limit / n + 1) return -1;
    n *= p->shape[d];
  }
  return n;
}

/* Which buffers a hook takes. */
typedef enum ddph_test_dtypes {
  DDPH_TEST_FLOAT32_ONLY,
  DDPH_TEST_ANY_DTYPE, /* every dtype ddph.h lists: f16/bf16/f32/f64, i32/i64, u8 */
} ddph_test_dtypes_t;

static int ddph_test_listed_dtype(DLDataType t) {
  if (t.lanes != 1) return 0;
  switch (t.code) {
    case kDLFloat:
      return t.bits == 16 || t.bits == 32 || t.bits == 64;
    case kDLBfloat:
      return t.bits == 16;
    case kDLInt:
      return t.bits == 32 || t.bits == 64;
    case kDLUInt:
      return t.bits == 8;
  }
  return 0;
}

/* run_bucket's arguments: a 1-D contiguous host buffer of an accepted
 * dtype, and parameter views inside it. */
static ddph_test_problem_t ddph_test_check_run(const void* state, const ddph_bucket_t* b,
                                               ddph_done_fn done, ddph_test_dtypes_t dtypes) {
  const DLTensor* t;
  size_t i;
  if (state == NULL || b == NULL || done == NULL)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "NULL state, bucket or done");
  if (b->struct_size < DDPH_BUCKET_SIZE_V1_0)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.struct_size too small");
  t = &b->buffer;
  if (t->ndim != 1 || t->shape == NULL)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.buffer must be 1-D");
  if (t->shape[0] < 0)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.buffer.shape[0] is negative");
  if (t->data == NULL)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.buffer.data is NULL");
  if (t->device.device_type != kDLCPU)
    return ddph_test_problem(DDPH_UNSUPPORTED, "host buffers only");
  if (dtypes == DDPH_TEST_FLOAT32_ONLY
          ? !(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1)
          : !ddph_test_listed_dtype(t->dtype))
    return ddph_test_problem(DDPH_UNSUPPORTED, dtypes == DDPH_TEST_FLOAT32_ONLY
                                                   ? "bucket.buffer.dtype must be float32"
                                                   : "bucket.buffer.dtype is not one ddph.h lists");
  if (t->strides != NULL && t->strides[0] != 1)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.buffer must be contiguous");
  if (b->num_params > 0 && b->params == NULL)
    return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.params is NULL");
  for (i = 0; i < b->num_params; ++i) {
    const ddph_param_t* p = &b->params[i];
    int64_t n;
    if (p->struct_size < DDPH_PARAM_SIZE_V1_0 || p->ndim < 0 || (p->ndim > 0 && p->shape == NULL))
      return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.params[i] is malformed");
    n = ddph_test_view_numel(p, t->shape[0]);
    if (n < 0 || p->offset < 0 || p->offset > t->shape[0] - n)
      return ddph_test_problem(DDPH_INVALID_ARGUMENT, "bucket.params[i] lies outside the buffer");
  }
  return kDdphTestNoProblem;
}

#endif /* DDPH_TESTS_SUPPORT_C_PLUGIN_CHECKS_H */
