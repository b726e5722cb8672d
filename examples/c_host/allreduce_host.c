/*
 * A plain C99 host: dlopen()s libddph.so at run time (no link-time
 * dependency), opens a session from a YAML file, and averages a buffer
 * across ranks through whatever hook the YAML names.
 *
 *   allreduce_host CONFIG.yaml RANK WORLD RENDEZVOUS [N [FACTOR]]
 *
 * Every rank fills element i with (rank + 1) * (i % 7); the mean over ranks
 * is then (world + 1) / 2 * (i % 7), times FACTOR (default 1) for hooks that
 * scale it. Prints "rank R: ok" when every element
 * matches (to 1e-3 relative, so fp16 hooks pass too), else the first mismatch.
 * Finds the library through $DDPH_LIBRARY, else the loader's search path.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ddph/ddph.h>

typedef ddph_error_t *(*open_fn)(const ddph_session_options_t *, ddph_session_t **);
typedef ddph_error_t *(*submit_fn)(ddph_session_t *, const ddph_bucket_t *, ddph_done_fn, void *);
typedef ddph_error_t *(*flush_fn)(ddph_session_t *);
typedef void (*close_fn)(ddph_session_t *);
typedef const char *(*message_fn)(const ddph_error_t *);
typedef void (*free_fn)(ddph_error_t *);

static message_fn error_message;
static free_fn error_free;

static int report(const char *what, ddph_error_t *e) {
  fprintf(stderr, "%s failed: %s\n", what, error_message(e));
  error_free(e);
  return 1;
}

static void on_done(void *user, ddph_error_t *error) {
  int *calls = (int *)user;
  ++*calls;
  if (error != NULL) {
    fprintf(stderr, "bucket failed: %s\n", error_message(error));
    error_free(error);
  }
}

#define LOAD(type, var, name)                                       \
  type var = (type)dlsym(lib, name);                                \
  if (var == NULL) {                                                \
    fprintf(stderr, "libddph.so lacks %s: %s\n", name, dlerror()); \
    return 1;                                                       \
  }

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s CONFIG.yaml RANK WORLD RENDEZVOUS [N [FACTOR]]\n", argv[0]);
    return 2;
  }
  const char *path = getenv("DDPH_LIBRARY") ? getenv("DDPH_LIBRARY") : "libddph.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return 1;
  }
  LOAD(open_fn, session_open, "ddph_session_open");
  LOAD(submit_fn, session_submit, "ddph_session_submit");
  LOAD(flush_fn, session_flush, "ddph_session_flush");
  LOAD(close_fn, session_close, "ddph_session_close");
  LOAD(message_fn, message, "ddph_error_message");
  LOAD(free_fn, free_error, "ddph_error_free");
  error_message = message;
  error_free = free_error;

  const int rank = atoi(argv[2]), world = atoi(argv[3]);
  const int64_t n = argc > 5 ? atoll(argv[5]) : 1000;
  const double factor = argc > 6 ? atof(argv[6]) : 1.0;

  ddph_session_options_t opts;
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.yaml_path = argv[1];
  opts.rank = rank;
  opts.world_size = world;
  opts.rendezvous = argv[4];
  ddph_session_t *session = NULL;
  ddph_error_t *e = session_open(&opts, &session);
  if (e != NULL) return report("ddph_session_open", e);

  float *data = (float *)malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) data[i] = (float)((rank + 1) * (i % 7));

  int64_t shape[1] = {n};
  ddph_bucket_t bucket;
  memset(&bucket, 0, sizeof bucket);
  bucket.struct_size = sizeof bucket;
  bucket.is_last = 1;
  bucket.buffer.data = data;
  bucket.buffer.device.device_type = kDLCPU;
  bucket.buffer.ndim = 1;
  bucket.buffer.dtype.code = kDLFloat;
  bucket.buffer.dtype.bits = 32;
  bucket.buffer.dtype.lanes = 1;
  bucket.buffer.shape = shape;

  int calls = 0;
  e = session_submit(session, &bucket, on_done, &calls);
  if (e != NULL) return report("ddph_session_submit", e);
  e = session_flush(session);
  if (e != NULL) return report("ddph_session_flush", e);
  session_close(session);

  int status = calls == 1 ? 0 : 1;
  for (int64_t i = 0; i < n && status == 0; ++i) {
    const double want = factor * (world + 1) / 2.0 * (double)(i % 7);
    if (fabs(data[i] - want) > 1e-3 * fabs(want)) {
      fprintf(stderr, "rank %d: element %lld is %g, expected %g\n", rank, (long long)i, data[i], want);
      status = 1;
    }
  }
  if (status == 0) printf("rank %d: ok (%lld elements averaged over %d ranks)\n", rank, (long long)n, world);
  free(data);
  dlclose(lib);
  return status;
}
