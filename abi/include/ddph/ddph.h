/*
 * ddph.h: the stable C ABI of ddphooks, version 1 (minor 7).
 *
 * One header for both sides of the boundary:
 *   - plugins (hook families and communicators) export ddph_plugin_entry();
 *   - hosts (training frameworks, C programs) call the ddph_session_* API of
 *     libddph.so, which loads plugins and runs their hooks.
 *
 * C99, and valid C++. No C++ type or exception crosses this boundary.
 *
 * Conventions that hold for every declaration below unless its comment says
 * otherwise:
 *   - Every struct that crosses the boundary begins with `size_t struct_size`,
 *     set by whoever fills the struct to sizeof() of the struct it was compiled
 *     against. Fields are only ever appended; a reader must ignore fields that
 *     lie beyond struct_size and must reject a struct_size smaller than the
 *     v1.0 size (DDPH_*_SIZE_V1_0).
 *   - A NULL function pointer in a table means "not supported".
 *   - A returned `ddph_error_t *` of NULL means success. A non-NULL error is
 *     owned by the receiver, who frees it once (ddph_error_free, or the host
 *     table's error_free inside a plugin).
 *   - Strings are NUL-terminated UTF-8. A `const char *` argument is borrowed
 *     for the duration of the call unless stated otherwise.
 *   - Threading tags: [thread-safe] may be called from any thread at any
 *     time; [serialized] calls on one object never overlap (the caller
 *     guarantees it); [any-thread] callbacks may arrive on any thread.
 */
#ifndef DDPH_DDPH_H
#define DDPH_DDPH_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h> /* DLTensor, DLDevice, DLDataType (Debian libdlpack-dev) */

#ifdef __cplusplus
extern "C" {
#endif

#define DDPH_ABI_MAJOR 1 /* host and plugin must agree exactly */
#define DDPH_ABI_MINOR 10 /* capability level: a plugin with a newer minor still loads */

/* The size of a struct up to and including one of its fields: the size a
 * reader accepts as the minimum for that struct's version. */
#define DDPH_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

#if defined(__GNUC__) || defined(__clang__)
#define DDPH_EXPORT __attribute__((visibility("default")))
#else
#define DDPH_EXPORT
#endif

/* ======================================================================
 * Errors
 * ==================================================================== */

typedef enum ddph_code {
  DDPH_OK = 0,
  DDPH_INVALID_ARGUMENT = 1, /* misuse: NULL pointer, bad struct_size, bad option, bad bucket */
  DDPH_UNSUPPORTED = 2,      /* valid request this plugin or backend cannot serve (dtype, device) */
  DDPH_NOT_FOUND = 3,        /* plugin file, symbol, family, hook or key not found */
  DDPH_VERSION_MISMATCH = 4, /* ABI major differs, or a struct is older than v1.0 */
  DDPH_COMM_FAILURE = 5,     /* a peer died, a connection broke, ranks disagree */
  DDPH_TIMEOUT = 6,          /* a collective or rendezvous ran past its timeout */
  DDPH_OUT_OF_MEMORY = 7,
  DDPH_INTERNAL = 8, /* a bug in ddphooks or a plugin; the message says where */
  DDPH_NONFINITE = 9 /* a gradient held NaN or Inf and the hook was told to refuse it */
} ddph_code_t;

/* Opaque. Made only by the loader (ddph_host_t.error_new), so that a host can
 * free an error that came from any plugin. */
typedef struct ddph_error ddph_error_t;

/* ======================================================================
 * Store: a key-value rendezvous service (file, Redis, rank 0's process over
 * TCP, or the host's own, e.g. PyTorch's c10d store). Communicators use it
 * to exchange addresses.
 * ==================================================================== */

/* Receives a value. `bytes` is borrowed for the duration of the call only. */
typedef void (*ddph_write_fn)(void *sink, const void *bytes, size_t n);

typedef struct ddph_store {
  size_t struct_size;
  void *ctx; /* owned by whoever filled the table */
  /* Sets key to value, overwriting. [thread-safe] */
  ddph_error_t *(*set)(void *ctx, const char *key, const void *value, size_t n);
  /* Blocks until key exists or timeout_ms passes (DDPH_TIMEOUT), then hands
   * the value to write(sink, ...) exactly once. [thread-safe] */
  ddph_error_t *(*get)(void *ctx, const char *key, int64_t timeout_ms, ddph_write_fn write,
                       void *sink);
  /* --- ABI 1.4 --- */
  /* Removes key; a missing key is success. Optional (NULL, or a table older
   * than DDPH_STORE_SIZE_V1_4): the session then leaves its keys in the store
   * when it closes. The loader removes a job's keys once every rank has read
   * them, so that the same job id can run again. [thread-safe] */
  ddph_error_t *(*del)(void *ctx, const char *key);
} ddph_store_t;
#define DDPH_STORE_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_store_t, get)
#define DDPH_STORE_SIZE_V1_4 DDPH_SIZE_THROUGH(ddph_store_t, del)

/* ======================================================================
 * Device memory the host lends (ABI 1.3), e.g. PyTorch's caching allocator,
 * so that the scratch of hooks and communicators on GPU buckets comes from
 * the host's pool instead of ddphooks' own. Optional everywhere: without
 * one, plugins use their own stream-ordered pool.
 * ==================================================================== */

typedef struct ddph_device_allocator {
  size_t struct_size;
  void *ctx; /* owned by the host */
  /* Returns `bytes` (> 0) of memory on `device` (kDLCUDA), usable by work
   * enqueued on `stream` (a cudaStream_t; NULL is the legacy default
   * stream) after the call, or NULL when it has none (the caller then
   * fails with DDPH_OUT_OF_MEMORY). [thread-safe] */
  void *(*alloc)(void *ctx, size_t bytes, DLDevice device, void *stream);
  /* Takes back memory from alloc once the work enqueued on `stream` so far
   * has finished (stream-ordered, as cudaFreeAsync); `stream` and `device`
   * are those of the matching alloc. [thread-safe] */
  void (*free)(void *ctx, void *ptr, DLDevice device, void *stream);
} ddph_device_allocator_t;
#define DDPH_DEVICE_ALLOCATOR_SIZE_V1_3 DDPH_SIZE_THROUGH(ddph_device_allocator_t, free)

/* ======================================================================
 * What the loader hands to every plugin (ddph_plugin_entry's argument).
 * The table and every function in it stay valid until the plugin is
 * unloaded. All functions are [thread-safe].
 * ==================================================================== */

typedef enum ddph_log_level {
  DDPH_LOG_ERROR = 0,
  DDPH_LOG_WARN = 1,
  DDPH_LOG_INFO = 2,
  DDPH_LOG_DEBUG = 3
} ddph_log_level_t;

/* ABI 1.7: the phases of a bucket that a hook reports to the loader
 * (ddph_host_t.span) and that ddph_session_take_spans returns. Later minors
 * may add phases: a reader shows one it does not know by its number. */
typedef enum ddph_phase {
  DDPH_PHASE_COMPRESS = 0,      /* encoding the gradient for the wire (quantize, cast, project) */
  DDPH_PHASE_COLLECTIVE = 1,    /* one call of the communicator */
  DDPH_PHASE_DECOMPRESS = 2,    /* decoding what came back into the bucket */
  DDPH_PHASE_OPTIMIZER_STEP = 3 /* stepping an optimizer on the bucket's parameters */
} ddph_phase_t;

struct ddph_bucket; /* below */

typedef struct ddph_host {
  size_t struct_size;
  uint32_t abi_major, abi_minor; /* the loader's own ABI version */
  /* Makes an error; copies message. Never returns NULL for code != DDPH_OK. */
  ddph_error_t *(*error_new)(ddph_code_t code, const char *message);
  void (*error_free)(ddph_error_t *error);
  ddph_code_t (*error_code)(const ddph_error_t *error);
  /* Borrowed; valid until the error is freed. */
  const char *(*error_message)(const ddph_error_t *error);
  /* family may be NULL. message is copied. */
  void (*log)(ddph_log_level_t level, const char *family, const char *message);
  /* --- ABI 1.7 --- */
  /* Reports that `phase` of a bucket ran from start_ns to end_ns, both read
   * from CLOCK_MONOTONIC (std::chrono::steady_clock on Linux), once the
   * phase has ended. The loader keeps it for ddph_session_take_spans,
   * attributed to the bucket the calling thread is running for a session
   * (the session's worker, inside run_bucket, a wrapper's inner hooks
   * included); on any other thread, to the session bucket whose
   * ddph_bucket_t is `bucket` (the pointer the outermost hook was handed,
   * compared, never read, until that bucket's done), as a hook that steps
   * on a thread of its own must pass it; else the span is dropped. bucket
   * may be NULL. Takes a mutex, never blocks on I/O. A plugin calls it only
   * when struct_size >= DDPH_HOST_SIZE_V1_7 and it is non-NULL (an older
   * loader's table ends before it). [thread-safe] */
  void (*span)(const struct ddph_bucket *bucket, ddph_phase_t phase, uint64_t start_ns,
               uint64_t end_ns);
} ddph_host_t;
#define DDPH_HOST_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_host_t, log)
#define DDPH_HOST_SIZE_V1_7 DDPH_SIZE_THROUGH(ddph_host_t, span)

/* ======================================================================
 * Options. Each hook and each communicator publishes a schema; the loader
 * turns YAML into typed values, checks them against the schema, fills in
 * defaults, and hands the complete list to create().
 * ==================================================================== */

typedef enum ddph_type { DDPH_BOOL = 0, DDPH_INT = 1, DDPH_FLOAT = 2, DDPH_STRING = 3 } ddph_type_t;

typedef struct ddph_option_spec {
  size_t struct_size;
  const char *name;          /* nested YAML maps flatten to "optimizer.lr" */
  ddph_type_t type;
  const char *default_value; /* as YAML text; NULL means the option is required */
  const char *doc;           /* one line, shown by `ddph plugins` */
  /* DDPH_INT and DDPH_FLOAT: inclusive bounds; min > max means unbounded. */
  double min_value, max_value;
  /* DDPH_STRING and DDPH_INT: allowed values separated by '|' ("8|4|2"),
   * or NULL for any value (within the range, for DDPH_INT). */
  const char *choices;
} ddph_option_spec_t;
#define DDPH_OPTION_SPEC_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_option_spec_t, choices)

typedef struct ddph_option {
  size_t struct_size;
  const char *name; /* borrowed; lives until create() returns */
  ddph_type_t type;
  union {
    int32_t b;
    int64_t i;
    double f;
    const char *s; /* borrowed; lives until create() returns */
  } value;
} ddph_option_t;
#define DDPH_OPTION_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_option_t, value)

/* ======================================================================
 * Communicator: hooks reach collectives only through this table. A comm
 * plugin (gloo, nccl, mpi) makes one, or the host provides its own.
 *
 * Collectives block the calling thread until the result is in recv (on the
 * host) or enqueued on `stream` (CUDA, stream != NULL). They are
 * [serialized] per communicator: the session calls them from its worker
 * thread only, in the same order on every rank. send and recv tensors are
 * 1-D contiguous with the same dtype; send may alias recv (in place).
 * Every collective respects the communicator's timeout: a dead or missing
 * peer becomes DDPH_TIMEOUT or DDPH_COMM_FAILURE, never a hang.
 * ==================================================================== */

/* DDPH_AVG is the mean with PyTorch's divide-first numerics: each rank's
 * value is divided by the world size (in its dtype; integers truncate toward
 * zero), then the quotients are summed. */
typedef enum ddph_reduce_op { DDPH_SUM = 0, DDPH_AVG = 1, DDPH_MAX = 2, DDPH_MIN = 3 } ddph_reduce_op_t;

typedef struct ddph_comm {
  size_t struct_size;
  void *ctx;
  int (*rank)(void *ctx); /* [thread-safe] */
  int (*size)(void *ctx); /* [thread-safe] */
  /* recv has send's numel. */
  ddph_error_t *(*allreduce)(void *ctx, const DLTensor *send, DLTensor *recv, ddph_reduce_op_t op,
                             void *stream);
  /* recv has size() * send numel elements, rank r's block at r * numel. */
  ddph_error_t *(*allgather)(void *ctx, const DLTensor *send, DLTensor *recv, void *stream);
  /* send has size() * recv numel elements; rank r receives the reduction of block r.
   * In place, recv is block rank() of send (as ncclReduceScatter takes it);
   * send's other blocks are then left undefined (the communicator may
   * combine into them instead of into a copy). */
  ddph_error_t *(*reduce_scatter)(void *ctx, const DLTensor *send, DLTensor *recv,
                                  ddph_reduce_op_t op, void *stream);
  ddph_error_t *(*broadcast)(void *ctx, DLTensor *buf, int root, void *stream);
  ddph_error_t *(*barrier)(void *ctx);
  /* Optional point-to-point; matched in order per (sender, receiver) pair. */
  ddph_error_t *(*send)(void *ctx, const DLTensor *buf, int peer, void *stream);
  ddph_error_t *(*recv)(void *ctx, DLTensor *buf, int peer, void *stream);
  /* Optional: a sub-communicator of the ranks that pass the same color,
   * ordered by key (ties by rank). Collective over this communicator. A
   * negative color joins no group: *out is set to NULL. *out is owned by the
   * caller, who calls (*out)->destroy((*out)->ctx) before destroying this
   * communicator. */
  ddph_error_t *(*split)(void *ctx, int color, int key, struct ddph_comm **out);
  /* Optional: payload bytes this rank has put on the wire so far. [thread-safe] */
  uint64_t (*bytes_sent)(void *ctx);
  /* Frees ctx and the table itself if the maker allocated it. Not called by
   * the loader on a host-provided communicator. */
  void (*destroy)(void *ctx);
  /* --- ABI 1.1 --- */
  /* Optional: every rank sends block p of send to rank p and receives rank
   * p's block for it into block p of recv, self included (a local copy).
   * Blocks are packed in rank order: block p of send starts at the sum of
   * send_counts[0..p) elements, likewise for recv. send_counts and
   * recv_counts have size() entries, >= 0, summing to the numel of send and
   * recv; they are borrowed for the call. recv_counts[p] must equal rank p's
   * send_counts[rank()] (the caller's promise: ranks cannot check it without
   * another round trip). send and recv have one dtype and do not overlap.
   * One call lets a backend move all blocks at once, where a loop of
   * send/recv pays a round trip per peer. */
  ddph_error_t *(*alltoallv)(void *ctx, const DLTensor *send, const int64_t *send_counts,
                             DLTensor *recv, const int64_t *recv_counts, void *stream);
  /* --- ABI 1.2 --- */
  /* Optional: payload bytes this rank has put on the wire so far to the
   * process that is rank `peer` of this communicator, over this communicator
   * and every communicator that shares its count (those split from it, and
   * the one it was split from: the same family as bytes_sent). 0 for this
   * rank itself, a peer outside [0, size()), or bytes the backend cannot
   * attribute to a peer. Lets a host measure the traffic between machines.
   * [thread-safe] */
  uint64_t (*bytes_sent_to)(void *ctx, int peer);
} ddph_comm_t;
#define DDPH_COMM_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_comm_t, destroy)
#define DDPH_COMM_SIZE_V1_1 DDPH_SIZE_THROUGH(ddph_comm_t, alltoallv)
#define DDPH_COMM_SIZE_V1_2 DDPH_SIZE_THROUGH(ddph_comm_t, bytes_sent_to)

/* ABI 1.5: what the optional check() of a hook or a communicator receives
 * and fills. check() judges the options as a whole (a value allowed alone
 * but not with another: PowerSGD's start_iter 1 with error feedback) with no
 * communicator and no peers, so that `ddph validate` and ddph_session_open
 * refuse such a job before connecting. Each option already lies in its
 * spec's range and choices. check() must not refuse what create() accepts;
 * create() may still refuse what only run time shows. Everything is
 * borrowed for the duration of the call. */
typedef struct ddph_check {
  size_t struct_size;
  const ddph_host_t *host;
  const ddph_option_t *options; /* complete with defaults */
  size_t num_options;
  /* Hooks: the dtype of the buckets the hook will be given, when a wrapper
   * fixes it (fp16_wrapper hands its inner hook float16); bits == 0 when not
   * known. Communicators: bits == 0. */
  DLDataType bucket_dtype;
  /* --- filled by check() --- */
  /* On error: the name of the option at fault (static storage, such as an
   * option spec's name), or NULL; the loader points at that key's line. */
  const char *bad_option;
  /* Wrappers: the dtype of the buckets they hand their inner hook; left
   * bits == 0 for "the dtype it was given". The loader then checks the
   * inner hook with it. */
  DLDataType inner_bucket_dtype;
} ddph_check_t;
#define DDPH_CHECK_SIZE_V1_5 DDPH_SIZE_THROUGH(ddph_check_t, inner_bucket_dtype)

/* What a comm plugin's create() receives. Everything is borrowed for the
 * duration of create() unless stated otherwise. */
typedef struct ddph_comm_init {
  size_t struct_size;
  const ddph_host_t *host; /* outlives the communicator */
  int32_t rank, world_size;
  const char *rendezvous;     /* "file:///dir", "redis://host:port", "tcp://host:port",
                                 "env://", or NULL when store is set */
  const ddph_store_t *store;  /* host store, or NULL; outlives the communicator */
  const char *prefix;         /* namespace for store keys, unique per session of a job */
  int64_t timeout_ms;         /* for rendezvous and for every collective */
  const ddph_option_t *options; /* the backend's own options, complete with defaults */
  size_t num_options;
  /* --- ABI 1.3 --- */
  /* The host's device allocator, or NULL; outlives the communicator. Read
   * only when struct_size >= DDPH_COMM_INIT_SIZE_V1_3. */
  const ddph_device_allocator_t *device_allocator;
} ddph_comm_init_t;
#define DDPH_COMM_INIT_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_comm_init_t, num_options)
#define DDPH_COMM_INIT_SIZE_V1_3 DDPH_SIZE_THROUGH(ddph_comm_init_t, device_allocator)

typedef struct ddph_comm_factory {
  size_t struct_size;
  const char *backend; /* the YAML comm.backend that selects it, e.g. "gloo" */
  const char *summary;
  const ddph_option_spec_t *options;
  size_t num_options;
  /* Collective over all ranks: connects to the peers (rendezvous) and fills
   * *out with a table owned by the caller until (*out)->destroy. [thread-safe] */
  ddph_error_t *(*create)(const ddph_comm_init_t *init, ddph_comm_t **out);
  /* --- ABI 1.5 --- */
  /* Optional: checks the options as a whole, without peers (see
   * ddph_check_t). Read only when struct_size >= DDPH_COMM_FACTORY_SIZE_V1_5.
   * [thread-safe] */
  ddph_error_t *(*check)(ddph_check_t *c);
} ddph_comm_factory_t;
#define DDPH_COMM_FACTORY_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_comm_factory_t, create)
#define DDPH_COMM_FACTORY_SIZE_V1_5 DDPH_SIZE_THROUGH(ddph_comm_factory_t, check)

/* ======================================================================
 * Bucket: the flat gradient buffer of some parameters, as DDP forms it.
 * ==================================================================== */

typedef struct ddph_param {
  size_t struct_size;
  int64_t offset;       /* element offset of this gradient in the bucket buffer */
  int32_t ndim;
  const int64_t *shape; /* gradient view shape; ndim entries */
  DLTensor data;        /* the parameter itself for optimizer hooks; data.data == NULL if not shared */
} ddph_param_t;
#define DDPH_PARAM_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_param_t, data)

typedef struct ddph_bucket {
  size_t struct_size;
  uint64_t index; /* stable id of the bucket within a step, the same on every rank */
  uint64_t step;  /* training step, counted by the host */
  int32_t is_last; /* non-zero on the last bucket of the step */
  DLTensor buffer; /* 1-D contiguous; the hook writes the result here in place */
  size_t num_params;
  const ddph_param_t *params; /* num_params entries, or NULL when num_params == 0 */
  void *stream; /* cudaStream_t for CUDA buffers, NULL on the host */
  /* --- ABI 1.2 --- */
  /* Optional: the host's stable id of each parameter, num_params entries
   * (e.g. its index in model.parameters()): the same on every rank and on
   * every step, even when the host regroups parameters into other buckets
   * (DDP rebuilds its buckets after the first step). NULL when the host has
   * none. Hooks that keep state per parameter (hook_then_optimizer) key it
   * by id when given, else by (bucket index, position). Borrowed like
   * params. Read it only when struct_size >= DDPH_BUCKET_SIZE_V1_2. */
  const int64_t *param_ids;
  /* --- ABI 1.8 --- */
  /* Non-zero when the caller has already checked params against a buffer
   * of buffer.shape[0] elements (every struct_size, ndim and shape, and
   * every view within the buffer, as ddph_session_submit checks them): a
   * hook may then skip that per-parameter check and check the buffer only
   * (shape, dtype, the memory it runs on). The session sets it on every
   * bucket it hands a hook; a host that calls a hook directly leaves it 0,
   * and the hook checks everything. A wrapper may pass it on to its inner
   * hook on a buffer of the same element count (ddph::bucket_over does).
   * Read it only when struct_size >= DDPH_BUCKET_SIZE_V1_8. */
  int32_t params_checked;
} ddph_bucket_t;
#define DDPH_BUCKET_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_bucket_t, stream)
#define DDPH_BUCKET_SIZE_V1_2 DDPH_SIZE_THROUGH(ddph_bucket_t, param_ids)
#define DDPH_BUCKET_SIZE_V1_8 DDPH_SIZE_THROUGH(ddph_bucket_t, params_checked)

/* Completion of one bucket. Called exactly once per accepted bucket, from
 * [any-thread], possibly before the call that accepted it returns. The
 * callee owns error (NULL = success). On CUDA, success means the result is
 * ordered on the bucket's stream, not that the host has waited for it. */
typedef void (*ddph_done_fn)(void *user, ddph_error_t *error);

/* ======================================================================
 * Hooks
 * ==================================================================== */

typedef struct ddph_stats {
  size_t struct_size;
  uint64_t steps;     /* completed steps (buckets with is_last) */
  uint64_t buckets;   /* completed buckets */
  uint64_t bytes_in;  /* gradient bytes handed to the hook */
  uint64_t bytes_out; /* payload bytes the hook gave to collectives */
  uint64_t wire_bytes; /* bytes this rank's communicator put on the wire; 0 if unknown */
} ddph_stats_t;
#define DDPH_STATS_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_stats_t, wire_bytes)

struct ddph_hook;
/* A created hook: its table and its state. Borrowed by whoever holds it. */
typedef struct ddph_hook_ref {
  const struct ddph_hook *hook;
  void *state;
} ddph_hook_ref_t;

typedef struct ddph_hook_init {
  size_t struct_size;
  const ddph_host_t *host;     /* outlives the state */
  ddph_comm_t *comm;           /* borrowed; outlives the state */
  const ddph_option_t *options; /* complete with defaults; borrowed until create() returns */
  size_t num_options;
  const ddph_hook_ref_t *inner; /* the wrapped hook, or NULL; *inner->state outlives the state */
  /* --- ABI 1.2 --- */
  /* For a hook flagged DDPH_HOOK_MAKES_INNER (else NULL): makes the hook
   * chain named under the wrapper's `wrap:` on a communicator of the
   * wrapper's choice, where init->inner is NULL. Collective over `comm`: every
   * rank of comm calls it, in the same order; ranks outside comm do not.
   * comm is borrowed and must outlive what is made. On success *out holds a
   * hook table and state owned by the wrapper, which frees them with
   * out->hook->destroy(out->state) before comm goes away; that one call
   * frees the whole chain (a wrapped wrapper included), and the table's
   * save_state/load_state/stats cover the whole chain. On error *out is
   * zeroed. May be called several times (each call makes a new chain).
   * Valid from create() until the wrapper's state is destroyed; [serialized]
   * with the wrapper's own create, run_bucket and destroy. */
  ddph_error_t *(*make_inner)(void *inner_ctx, ddph_comm_t *comm, ddph_hook_ref_t *out);
  void *inner_ctx; /* make_inner's first argument; owned by the loader */
  /* --- ABI 1.3 --- */
  /* The host's device allocator, or NULL; outlives the state. Read only
   * when struct_size >= DDPH_HOOK_INIT_SIZE_V1_3. */
  const ddph_device_allocator_t *device_allocator;
} ddph_hook_init_t;
#define DDPH_HOOK_INIT_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_hook_init_t, inner)
#define DDPH_HOOK_INIT_SIZE_V1_2 DDPH_SIZE_THROUGH(ddph_hook_init_t, inner_ctx)
#define DDPH_HOOK_INIT_SIZE_V1_3 DDPH_SIZE_THROUGH(ddph_hook_init_t, device_allocator)

/* flags */
#define DDPH_HOOK_NEEDS_INNER 0x1u  /* a wrapper: create() requires init->inner */
#define DDPH_HOOK_NEEDS_PARAMS 0x2u /* needs ddph_param_t.data (optimizer hooks) */
#define DDPH_HOOK_RESULT_ELSEWHERE 0x4u /* the result does not land in bucket->buffer */
/* ABI 1.1: the hook (or a hook it wraps) updates the parameters itself,
 * through params[].data (hook_then_optimizer), so the host skips its own
 * optimizer step. NEEDS_PARAMS without it (model averaging) means the hook
 * reads or writes the parameters but the host still steps. */
#define DDPH_HOOK_STEPS_OPTIMIZER 0x8u
/* ABI 1.2: a wrapper that makes its inner hook itself, on a communicator of
 * its choice, through init->make_inner (the hierarchical wrapper runs its
 * inner hook on one leader rank per machine). Always set together with
 * DDPH_HOOK_NEEDS_INNER, so that a 1.0/1.1 loader still asks for `wrap:`
 * and passes an inner hook made on init->comm (struct_size below
 * DDPH_HOOK_INIT_SIZE_V1_2), which the wrapper must then use as it is or
 * refuse with a message naming the loader version it needs. A 1.2 loader
 * passes inner = NULL and make_inner. */
#define DDPH_HOOK_MAKES_INNER 0x10u
/* ABI 1.6: the hook's buckets may overlap. The host may call run_bucket for
 * the next bucket as soon as run_bucket returns, without waiting for done
 * (hook_then_optimizer steps bucket k on a thread of its own while the host
 * starts bucket k + 1's communication). In exchange the hook
 *   - calls the done of the buckets it accepted in the order it accepted
 *     them, each exactly once, from any thread (possibly before run_bucket
 *     returns); a bucket it refuses (an error from run_bucket) has no done;
 *   - makes its collectives on init->comm only within run_bucket, so that
 *     the host may use the communicator between two run_bucket calls;
 *   - keeps run_bucket's borrowing rules: the bucket struct until
 *     run_bucket returns, the memory it points to until that bucket's done;
 *   - keeps stats [thread-safe] while buckets are in flight;
 * and the host
 *   - still never overlaps two run_bucket calls ([serialized]);
 *   - calls save_state, load_state and destroy only once done has been
 *     called for every accepted bucket. The hook's thread may still be
 *     returning from the last done then: destroy waits for it.
 * A host older than 1.6 ignores the flag and waits for each done, which
 * stays correct, so the hook must work either way; so does a wrapper that
 * runs it as its inner hook and waits (ddph::run_hook_blocking). */
#define DDPH_HOOK_PIPELINED 0x20u

/* ABI 1.8: the hook keeps nothing from one bucket to the next (its result
 * for a bucket depends on that bucket and the peers' alone), so a host may
 * run buckets on several states of it at once, each created on a
 * communicator of its own, and get the same results as on one state
 * (default allreduce, the fp16/bf16 compression wrappers around such a
 * hook). A wrapper says it only when its inner hook does too; a host checks
 * every hook of a chain. A host older than 1.8 ignores the flag. A hook
 * that is stateless with some options only leaves it out of `flags` and
 * says it per state through state_flags (1.9). */
#define DDPH_HOOK_STATELESS 0x40u

typedef struct ddph_hook {
  size_t struct_size;
  const char *name;    /* unique within its family */
  const char *summary; /* one line */
  const ddph_option_spec_t *options;
  size_t num_options;
  uint32_t flags;
  /* Makes the hook's state. Collective when the hook's create talks to
   * peers (none in v1.0 do). [thread-safe] */
  ddph_error_t *(*create)(const ddph_hook_init_t *init, void **state);
  /* Starts reducing bucket. On error it returns non-NULL and never calls
   * done. Otherwise done(user, ...) is called exactly once. The bucket
   * struct is borrowed until run_bucket returns; the memory it points to
   * (buffer, params) until done is called. [serialized] per state: the host
   * starts the next bucket only after done, unless the hook is flagged
   * DDPH_HOOK_PIPELINED (ABI 1.6): then as soon as run_bucket returns. */
  ddph_error_t *(*run_bucket)(void *state, const ddph_bucket_t *bucket, ddph_done_fn done,
                              void *user);
  /* Frees the state. Not while a bucket is in flight (for a PIPELINED hook:
   * not before done has been called for every accepted bucket). [serialized] */
  void (*destroy)(void *state);
  /* Optional: checkpointing. save_state writes a self-describing blob
   * through write(sink, ...), possibly in several pieces; load_state reads
   * one back, rejecting a corrupt or foreign blob with an error.
   * [serialized] with run_bucket; like destroy, never while a bucket is in
   * flight (a PIPELINED hook's dones have all been called). */
  ddph_error_t *(*save_state)(void *state, ddph_write_fn write, void *sink);
  ddph_error_t *(*load_state)(void *state, const void *bytes, size_t n);
  /* Optional: fills the fields of *out it knows; out->struct_size is set by
   * the caller. [thread-safe] */
  ddph_error_t *(*stats)(void *state, ddph_stats_t *out);
  /* --- ABI 1.5 --- */
  /* Optional: checks the options as a whole, without a communicator (see
   * ddph_check_t). Read only when struct_size >= DDPH_HOOK_SIZE_V1_5.
   * [thread-safe] */
  ddph_error_t *(*check)(ddph_check_t *c);
  /* --- ABI 1.9 --- */
  /* Optional: the flags of this state, for a hook whose DDPH_HOOK_STATELESS
   * depends on the options it was made with (quantization keeps nothing
   * from one bucket to the next unless error_feedback is on). Returns
   * `flags` with DDPH_HOOK_STATELESS set or cleared for this state, the
   * same on every rank for the same options. A host that reads it
   * (struct_size >= DDPH_HOOK_SIZE_V1_9 and not NULL) takes
   * DDPH_HOOK_STATELESS from it and every other flag from `flags`; an older
   * host reads `flags` alone. state: one that create made. [thread-safe] */
  uint32_t (*state_flags)(void *state);
  /* --- ABI 1.10 --- */
  /* Optional (NULL: the hook keeps no residual between buckets): adds the
   * error-feedback residual this state holds for bucket->index (what its
   * last reduction of that bucket left out) into bucket->buffer, element by
   * element, and forgets it, so that another hook reduces it instead. The
   * bucket has the layout the hook last saw for that index; a bucket index
   * it holds nothing for leaves the buffer unchanged. The auto chooser
   * (docs/auto.md) calls it on the hook it leaves, before the next hook
   * reduces the bucket, so no residual is ever dropped. Read only when
   * struct_size >= DDPH_HOOK_SIZE_V1_10. [serialized] with run_bucket; never
   * while a bucket is in flight. */
  ddph_error_t *(*take_residual)(void *state, const ddph_bucket_t *bucket);
} ddph_hook_t;
#define DDPH_HOOK_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_hook_t, stats)
#define DDPH_HOOK_SIZE_V1_5 DDPH_SIZE_THROUGH(ddph_hook_t, check)
#define DDPH_HOOK_SIZE_V1_9 DDPH_SIZE_THROUGH(ddph_hook_t, state_flags)
#define DDPH_HOOK_SIZE_V1_10 DDPH_SIZE_THROUGH(ddph_hook_t, take_residual)

/* ======================================================================
 * The one exported symbol of every plugin (file libddph_<family>.so).
 * ==================================================================== */

typedef struct ddph_plugin {
  size_t struct_size;
  uint32_t abi_major, abi_minor; /* what the plugin was built against */
  const char *family;  /* must equal <family> in the file name */
  const char *version; /* the plugin's own version */
  size_t num_hooks;
  const ddph_hook_t *const *hooks;
  size_t num_comms; /* comm plugins: communicator factories */
  const ddph_comm_factory_t *const *comms;
} ddph_plugin_t;
#define DDPH_PLUGIN_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_plugin_t, comms)

/* Returns the plugin's description, static and valid until the plugin is
 * unloaded; NULL if the plugin cannot work with this host. host outlives
 * the plugin. [thread-safe] */
typedef const ddph_plugin_t *(*ddph_plugin_entry_fn)(const ddph_host_t *host);
DDPH_EXPORT const ddph_plugin_t *ddph_plugin_entry(const ddph_host_t *host);

/* ======================================================================
 * Host API of libddph.so
 * ==================================================================== */

typedef struct ddph_session ddph_session_t;

typedef struct ddph_session_options {
  size_t struct_size;
  const char *yaml_path; /* exactly one of yaml_path and yaml_text */
  const char *yaml_text;
  /* -1: take it from the YAML comm section, else from the environment
   * (DDPH_RANK/DDPH_WORLD_SIZE, then RANK/WORLD_SIZE), else 0 and 1. */
  int32_t rank, world_size;
  /* Overrides the YAML's comm.rendezvous when non-NULL: "file:///dir",
   * "redis://host:port", "tcp://host:port" (rank 0 serves the store on
   * that port), "env://" (tcp://$MASTER_ADDR:$MASTER_PORT) or "host". */
  const char *rendezvous;
  /* The host's store, used when the YAML says `rendezvous: host` or gives
   * none. Borrowed; must outlive the session. */
  const ddph_store_t *store;
  /* The host's communicator, used when the YAML says `backend: host`.
   * Borrowed; must outlive the session; the session never destroys it. */
  ddph_comm_t *comm;
  /* --- ABI 1.3 --- */
  /* Device memory for the scratch of GPU buckets, or NULL for ddphooks'
   * own pool. Borrowed; must outlive the session. The session hands it to
   * its communicator and hooks. */
  const ddph_device_allocator_t *device_allocator;
  /* --- ABI 1.4 --- */
  /* The job id: every store key of the session is under it, so that jobs
   * sharing a store never meet. Overrides the YAML's comm.job when non-NULL;
   * without either, DDPH_JOB_ID, then torchrun's TORCHELASTIC_RUN_ID, then
   * "default" (see docs/config.md). 1 to 64 of [A-Za-z0-9._-]. Borrowed for
   * the duration of ddph_session_open. */
  const char *job;
} ddph_session_options_t;
#define DDPH_SESSION_OPTIONS_SIZE_V1_0 DDPH_SIZE_THROUGH(ddph_session_options_t, comm)
#define DDPH_SESSION_OPTIONS_SIZE_V1_3 \
  DDPH_SIZE_THROUGH(ddph_session_options_t, device_allocator)
#define DDPH_SESSION_OPTIONS_SIZE_V1_4 DDPH_SIZE_THROUGH(ddph_session_options_t, job)

/* Opens a session: parses and validates the YAML, loads the plugins,
 * connects the communicator (collective over all ranks) and creates the
 * hooks. On success *out is owned by the caller until ddph_session_close.
 * [thread-safe] */
DDPH_EXPORT ddph_error_t *ddph_session_open(const ddph_session_options_t *opts,
                                            ddph_session_t **out);

/* Queues bucket for the session's worker thread, which runs buckets one at a
 * time in submission order. The bucket struct and its params are copied; the
 * memory they point to stays borrowed until done is called. Returns an error
 * (and never calls done) if the bucket is malformed; otherwise done is called
 * exactly once. All ranks must submit the same buckets in the same order.
 * Done callbacks come in submission order, on the worker thread or, for a
 * hook flagged DDPH_HOOK_PIPELINED (1.6), whose next bucket starts before
 * the previous one is done, on a second thread of the session's own, so
 * that a done which takes its time holds up neither the next bucket nor
 * the hook.
 * [thread-safe], but the order of buckets is the order of the calls. */
DDPH_EXPORT ddph_error_t *ddph_session_submit(ddph_session_t *s, const ddph_bucket_t *bucket,
                                              ddph_done_fn done, void *user);

/* Waits until every submitted bucket is done. Returns the first error of
 * those buckets since the last flush (a copy: each done callback still got
 * its own). [thread-safe] */
DDPH_EXPORT ddph_error_t *ddph_session_flush(ddph_session_t *s);

/* Fills *out (out->struct_size set by the caller). [thread-safe] */
DDPH_EXPORT ddph_error_t *ddph_session_stats(ddph_session_t *s, ddph_stats_t *out);

/* ABI 1.5: the figures of one completed bucket, measured by the session
 * around its hook chain, so that every family that fills stats() has them. */
typedef struct ddph_bucket_metrics {
  size_t struct_size;
  uint64_t step;       /* counted from 0 at open; a step ends with an is_last bucket */
  uint32_t bucket;     /* index within its step, in submission order */
  int32_t is_last;     /* 1 for the step's last bucket */
  uint64_t bytes_in;   /* gradient bytes handed to the hook chain */
  uint64_t bytes_out;  /* payload bytes the hooks gave to collectives; 0 if no stats() */
  uint64_t wire_bytes; /* bytes this rank put on the wire for it; 0 if unknown */
  double queue_seconds; /* from ddph_session_submit to the worker starting it */
  double hook_seconds;  /* from the worker starting it to its completion */
  int32_t ok;           /* 1 when it completed without error */
  /* --- ABI 1.7 --- */
  /* CLOCK_MONOTONIC nanoseconds when the worker started it, the clock of
   * ddph_span_t: its hook time is [start_ns, start_ns + hook_seconds]. */
  uint64_t start_ns;
  /* --- ABI 1.10 --- */
  /* For `hook: {family: auto}` (docs/auto.md): the candidate that ran the
   * bucket, as its index in the session's candidate list (-1 for a fixed
   * hook or a rule's), and why it was chosen (a ddph_choice_reason_t). */
  int32_t candidate;
  int32_t choice_reason;
} ddph_bucket_metrics_t;
#define DDPH_BUCKET_METRICS_SIZE_V1_5 DDPH_SIZE_THROUGH(ddph_bucket_metrics_t, ok)
#define DDPH_BUCKET_METRICS_SIZE_V1_7 DDPH_SIZE_THROUGH(ddph_bucket_metrics_t, start_ns)
#define DDPH_BUCKET_METRICS_SIZE_V1_10 DDPH_SIZE_THROUGH(ddph_bucket_metrics_t, choice_reason)

/* ABI 1.10: why the auto chooser ran a bucket with the candidate it did. */
typedef enum ddph_choice_reason {
  DDPH_CHOICE_FIXED = 0,    /* not an auto hook: the job's hook or a rule's */
  DDPH_CHOICE_WARMUP = 1,   /* the first steps: the least lossy candidate */
  DDPH_CHOICE_EXPLORE = 2,  /* timing a candidate, in a bounded share of steps */
  DDPH_CHOICE_FASTEST = 3,  /* the fastest candidate the agreed measurements show */
  DDPH_CHOICE_CRITICAL = 4, /* the gradient norm jumped: lossy candidates held back */
  DDPH_CHOICE_MODEL = 5     /* deterministic mode: the stated link's model, not timings */
} ddph_choice_reason_t;

/* ABI 1.5: takes the oldest record not taken yet into *out
 * (out->struct_size set by the caller) and sets *taken to 1, or sets *taken
 * to 0 when there is none. The session keeps the latest 65536 records;
 * older ones are dropped. [thread-safe] */
DDPH_EXPORT ddph_error_t *ddph_session_take_metrics(ddph_session_t *s, ddph_bucket_metrics_t *out,
                                                    int32_t *taken);

/* ABI 1.7: one phase of one bucket, as a hook reported it (ddph_host_t.span). */
typedef struct ddph_span {
  size_t struct_size;
  uint64_t step;     /* as ddph_bucket_metrics_t.step */
  uint32_t bucket;   /* as ddph_bucket_metrics_t.bucket */
  int32_t phase;     /* a ddph_phase_t, or a newer plugin's phase this header does not name */
  uint64_t start_ns; /* CLOCK_MONOTONIC nanoseconds (Python's time.monotonic_ns(); */
  uint64_t end_ns;   /* wall clock = these + time.time_ns() - time.monotonic_ns()) */
} ddph_span_t;
#define DDPH_SPAN_SIZE_V1_7 DDPH_SIZE_THROUGH(ddph_span_t, end_ns)

/* ABI 1.7: takes the oldest span not taken yet into *out (out->struct_size
 * set by the caller) and sets *taken to 1, or sets *taken to 0 when there
 * is none. Spans come in the order the loader got them: within one bucket
 * the order its phases ended, except that a phase a hook ran on a helper
 * thread of its own may come after later ones. The session records them
 * always and keeps the latest 262144; older ones are dropped. [thread-safe] */
DDPH_EXPORT ddph_error_t *ddph_session_take_spans(ddph_session_t *s, ddph_span_t *out,
                                                  int32_t *taken);

/* Checkpointing of every hook's state in the session. Both wait for
 * in-flight buckets first. The blob is portable across ranks. */
DDPH_EXPORT ddph_error_t *ddph_session_save_state(ddph_session_t *s, ddph_write_fn write,
                                                  void *sink);
DDPH_EXPORT ddph_error_t *ddph_session_load_state(ddph_session_t *s, const void *bytes, size_t n);

/* The session's communicator, borrowed until close. Its collectives must
 * not run while buckets are in flight (flush first). */
DDPH_EXPORT ddph_comm_t *ddph_session_comm(ddph_session_t *s);

/* Waits for in-flight buckets, destroys hooks and communicator, frees s.
 * NULL is a no-op. Never call it from a done callback: it would wait for
 * the bucket whose callback is running (the same holds for flush). */
DDPH_EXPORT void ddph_session_close(ddph_session_t *s);

/* Error accessors for hosts. NULL error: DDPH_OK and "". */
DDPH_EXPORT ddph_code_t ddph_error_code(const ddph_error_t *e);
DDPH_EXPORT const char *ddph_error_message(const ddph_error_t *e);
DDPH_EXPORT void ddph_error_free(ddph_error_t *e);
/* The host table the loader gives plugins; lets a host make errors for its
 * own comm or store tables. Static. [thread-safe] */
DDPH_EXPORT const ddph_host_t *ddph_host(void);
/* "1.0" etc.: the loader's ABI version as text. Static. */
DDPH_EXPORT const char *ddph_version(void);

/* ABI 1.5: where log lines go. rank is the rank of the session whose
 * thread logged, or -1 when none is known; family is "loader", a plugin
 * family, or NULL. Strings are borrowed for the call. May be called from
 * any thread, several at once. [any-thread] */
typedef void (*ddph_log_fn)(void *user, ddph_log_level_t level, const char *family, int32_t rank,
                            const char *message);
/* Sends every log line of the loader and its plugins with level <=
 * max_level to fn(user, ...) instead of stderr; fn == NULL restores stderr
 * and the level of DDPH_LOG_LEVEL. user is borrowed until the next call.
 * Lines already being delivered may still reach the previous sink.
 * [thread-safe] */
DDPH_EXPORT void ddph_set_log_sink(ddph_log_fn fn, void *user, ddph_log_level_t max_level);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DDPH_DDPH_H */
