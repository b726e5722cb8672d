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

static ddph_error_t *run_bucket(void *state, const ddph_bucket_t *b, ddph_done_fn done,
                                void *user) {
  if (state == NULL || b == NULL || done == NULL || b->struct_size < DDPH_BUCKET_SIZE_V1_0)
    return fail(DDPH_INVALID_ARGUMENT, "scaled_mean: state, bucket or done is invalid");
  if (b->buffer.dtype.code != kDLFloat || b->buffer.dtype.bits != 32 || b->buffer.ndim != 1)
    return fail(DDPH_UNSUPPORTED, "scaled_mean: the bucket must be a 1-D float32 buffer");
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
