/* A hook plugin that keeps the whole contract, in plain C against ddph.h,
 * unless one DEFECT_* macro breaks exactly one rule. `ddph validate-plugin`
 * must pass the intact build and give each defect its own FAIL row:
 *   DEFECT_CRASH_IN_RUN   run_bucket writes through NULL on an accepted bucket
 *   DEFECT_NEVER_DONE     run_bucket accepts a bucket and never completes it
 *   DEFECT_HANG_IN_RUN    run_bucket never returns from an accepted bucket
 *   DEFECT_DONE_TWICE     run_bucket completes every bucket twice
 *   DEFECT_EXTRA_SYMBOL   exports a function without the ddph_ prefix
 *   DEFECT_ABI_MAJOR=N    claims to be built against ABI major N
 * FAMILY names the family (the file is libddph_<FAMILY>.so). */
#include <ddph/ddph.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/c_plugin_checks.h"

#ifndef FAMILY
#define FAMILY "hardening_good"
#endif
#ifndef DEFECT_ABI_MAJOR
#define DEFECT_ABI_MAJOR DDPH_ABI_MAJOR
#endif

static const ddph_host_t* g_host;

static ddph_error_t* refuse(const char* message) {
  return g_host->error_new(DDPH_INVALID_ARGUMENT, message);
}

typedef struct state {
  ddph_comm_t* comm;
  uint64_t buckets; /* checkpointed */
} state_t;

static ddph_error_t* create(const ddph_hook_init_t* init, void** out) {
  ddph_error_t* bad = ddph_test_refuse(g_host, "avg", ddph_test_check_init(init, out));
  if (bad != NULL) return bad;
  state_t* s = calloc(1, sizeof *s);
  if (s == NULL) return g_host->error_new(DDPH_OUT_OF_MEMORY, "avg: out of memory");
  s->comm = init->comm;
  *out = s;
  return NULL;
}

static ddph_error_t* run(void* state, const ddph_bucket_t* b, ddph_done_fn done, void* user) {
  ddph_error_t* bad =
      ddph_test_refuse(g_host, "avg", ddph_test_check_run(state, b, done, DDPH_TEST_FLOAT32_ONLY));
  if (bad != NULL) return bad;
  state_t* s = state;
  DLTensor buf = b->buffer;
  ddph_error_t* e = s->comm->allreduce(s->comm->ctx, &buf, &buf, DDPH_AVG, b->stream);
  s->buckets++;
#if defined(DEFECT_HANG_IN_RUN)
  for (;;) pause();
#endif
#if defined(DEFECT_CRASH_IN_RUN)
  *(volatile int*)(uintptr_t)(s->buckets - s->buckets) = 1;
#endif
#if !defined(DEFECT_NEVER_DONE)
  done(user, e);
#else
  (void)user;
  if (e != NULL) g_host->error_free(e);
#endif
#if defined(DEFECT_DONE_TWICE)
  done(user, NULL);
#endif
  return NULL;
}

static void destroy(void* state) {
  free(state);
}

static const char kMagic[4] = {'H', 'A', 'V', 'G'};

static ddph_error_t* save(void* state, ddph_write_fn write, void* sink) {
  const state_t* s = state;
  write(sink, kMagic, sizeof kMagic);
  write(sink, &s->buckets, sizeof s->buckets);
  return NULL;
}

static ddph_error_t* load(void* state, const void* bytes, size_t n) {
  state_t* s = state;
  if (bytes == NULL || n != sizeof kMagic + sizeof s->buckets || memcmp(bytes, kMagic, 4) != 0)
    return refuse("avg: not a hardening avg state (wrong size or magic)");
  memcpy(&s->buckets, (const char*)bytes + 4, sizeof s->buckets);
  return NULL;
}

static ddph_error_t* stats(void* state, ddph_stats_t* out) {
  if (state == NULL || out == NULL || out->struct_size < DDPH_STATS_SIZE_V1_0)
    return refuse("avg: stats needs a state and out.struct_size >= DDPH_STATS_SIZE_V1_0");
  out->buckets = ((const state_t*)state)->buckets;
  return NULL;
}

/* check (ABI 1.5): level 0 is refused, naming the option. The defect build
 * refuses its own default (2) as well. */
static ddph_error_t* check(ddph_check_t* c) {
  if (c == NULL || c->struct_size < DDPH_CHECK_SIZE_V1_5)
    return g_host->error_new(DDPH_INVALID_ARGUMENT, "check: c is NULL or too small");
  for (size_t i = 0; i < c->num_options; ++i) {
    if (strcmp(c->options[i].name, "level") != 0) continue;
#if defined(DEFECT_CHECK_REFUSES_DEFAULTS)
    const int refused = c->options[i].value.i != 4;
#else
    const int refused = c->options[i].value.i == 0;
#endif
    if (refused) {
      c->bad_option = "level";
      return g_host->error_new(DDPH_INVALID_ARGUMENT, "avg: level 0 leaves nothing to average");
    }
  }
  return NULL;
}

static ddph_option_spec_t g_options[1];
static ddph_hook_t g_hook;
static const ddph_hook_t* g_hooks[1];
static ddph_plugin_t g_plugin;

static void build_tables(void) {
  memset(g_options, 0, sizeof g_options);
  g_options[0].struct_size = sizeof g_options[0];
  g_options[0].name = "level";
  g_options[0].type = DDPH_INT;
  g_options[0].default_value = "2";
  g_options[0].doc = "unused; gives the schema check something to read";
  g_options[0].min_value = 0;
  g_options[0].max_value = 4;
  g_options[0].choices = "0|2|4";

  memset(&g_hook, 0, sizeof g_hook);
  g_hook.struct_size = sizeof g_hook;
  g_hook.name = "avg";
  g_hook.summary = "allreduce AVG through the communicator";
  g_hook.options = g_options;
  g_hook.num_options = 1;
  g_hook.create = create;
  g_hook.run_bucket = run;
  g_hook.destroy = destroy;
  g_hook.save_state = save;
  g_hook.load_state = load;
  g_hook.stats = stats;
  g_hook.check = check;
  g_hooks[0] = &g_hook;

  memset(&g_plugin, 0, sizeof g_plugin);
  g_plugin.struct_size = sizeof g_plugin;
  g_plugin.abi_major = DEFECT_ABI_MAJOR;
  g_plugin.abi_minor = DDPH_ABI_MINOR;
  g_plugin.family = FAMILY;
  g_plugin.version = "1.0-hardening";
  g_plugin.num_hooks = 1;
  g_plugin.hooks = g_hooks;
}

DDPH_EXPORT const ddph_plugin_t* ddph_plugin_entry(const ddph_host_t* host) {
  if (host == NULL || host->abi_major != DDPH_ABI_MAJOR) return NULL;
  g_host = host;
  build_tables();
  return &g_plugin;
}

#if defined(DEFECT_EXTRA_SYMBOL)
DDPH_EXPORT int hardening_helper_left_visible(void) {
  return 42;
}
#endif
