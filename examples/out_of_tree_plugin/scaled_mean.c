/*
 * Family "example", hook "scaled_mean": the mean over ranks, times the
 * option `scale`. Small on purpose: it shows the whole plugin contract
 * (entry point, option schema, create/run_bucket/destroy, errors made
 * through the host table, done called exactly once).
 */
#include <stdlib.h>
#include <string.h>

#include <ddph/ddph.h>

static const ddph_host_t *g_host;

typedef struct {
  ddph_comm_t *comm;
  double scale;
} state_t;

static ddph_error_t *fail(ddph_code_t code, const char *message) {
  return g_host->error_new(code, message);
}

static ddph_error_t *create(const ddph_hook_init_t *init, void **out) {
  if (init == NULL || out == NULL || init->struct_size < DDPH_HOOK_INIT_SIZE_V1_0 ||
      init->comm == NULL)
    return fail(DDPH_INVALID_ARGUMENT, "scaled_mean: init, out or init->comm is invalid");
  state_t *s = (state_t *)calloc(1, sizeof *s);
  if (s == NULL) return fail(DDPH_OUT_OF_MEMORY, "scaled_mean: out of memory");
  s->comm = init->comm;
  s->scale = 1.0;
  for (size_t i = 0; i < init->num_options; ++i)
    if (strcmp(init->options[i].name, "scale") == 0) s->scale = init->options[i].value.f;
  *out = s;
  return NULL;
}

/* A host may call run_bucket directly, without a session's checks: every
 * field the hook relies on is checked before anything is touched. */
static ddph_error_t *check_bucket(const ddph_bucket_t *b) {
  const DLTensor *t = &b->buffer;
  if (t->ndim != 1 || t->shape == NULL || t->shape[0] < 0 || t->data == NULL)
    return fail(DDPH_INVALID_ARGUMENT, "scaled_mean: bucket.buffer must be 1-D with data");
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1 ||
      t->device.device_type != kDLCPU)
    return fail(DDPH_UNSUPPORTED, "scaled_mean: bucket.buffer must be float32 on the host");
  if (b->num_params > 0 && b->params == NULL)
    return fail(DDPH_INVALID_ARGUMENT, "scaled_mean: bucket.params is NULL");
  for (size_t i = 0; i < b->num_params; ++i) { /* views must lie inside the buffer */
    const ddph_param_t *p = &b->params[i];
    int64_t n = 1;
    for (int32_t d = 0; d < p->ndim && n > 0; ++d) /* division: no overflow */
      n = (p->shape[d] < 0 || (p->shape[d] > 0 && n > t->shape[0] / p->shape[d]))
              ? -1
              : n * p->shape[d];
    if (p->ndim < 0 || n < 0 || n > t->shape[0] || p->offset < 0 || p->offset > t->shape[0] - n)
      return fail(DDPH_INVALID_ARGUMENT, "scaled_mean: bucket.params[i] lies outside the buffer");
  }
  return NULL;
}

static ddph_error_t *run_bucket(void *state, const ddph_bucket_t *b, ddph_done_fn done,
                                void *user) {
  if (state == NULL || b == NULL || done == NULL || b->struct_size < DDPH_BUCKET_SIZE_V1_0)
    return fail(DDPH_INVALID_ARGUMENT, "scaled_mean: state, bucket or done is invalid");
  ddph_error_t *bad = check_bucket(b);
  if (bad != NULL) return bad;
  state_t *s = (state_t *)state;
  ddph_error_t *e = s->comm->allreduce(s->comm->ctx, &b->buffer, (DLTensor *)&b->buffer,
                                       DDPH_SUM, b->stream);
  if (e != NULL) return e;
  const float factor = (float)(s->scale / s->comm->size(s->comm->ctx));
  float *x = (float *)((char *)b->buffer.data + b->buffer.byte_offset);
  for (int64_t i = 0; i < b->buffer.shape[0]; ++i) x[i] *= factor;
  done(user, NULL);
  return NULL;
}

static void destroy(void *state) { free(state); }

static const ddph_option_spec_t options[] = {
    {sizeof(ddph_option_spec_t), "scale", DDPH_FLOAT, "1.0", "multiplies the mean", -1e6, 1e6,
     NULL},
};

static const ddph_hook_t scaled_mean = {
    sizeof(ddph_hook_t), "scaled_mean", "mean over ranks times `scale`", options, 1, 0,
    create, run_bucket, destroy, NULL, NULL, NULL};

static const ddph_hook_t *const hooks[] = {&scaled_mean};

static const ddph_plugin_t plugin = {
    sizeof(ddph_plugin_t), DDPH_ABI_MAJOR, DDPH_ABI_MINOR, "example", "1.0.0", 1, hooks, 0, NULL};

DDPH_EXPORT const ddph_plugin_t *ddph_plugin_entry(const ddph_host_t *host) {
  if (host == NULL || host->abi_major != DDPH_ABI_MAJOR) return NULL;
  g_host = host;
  return &plugin;
}
