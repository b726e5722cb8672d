"""ddph sessions: one hook chain and one communicator, opened from YAML."""
import atexit
import ctypes
import json
import os
import threading
import uuid
import weakref

from . import _abi, _completion, _library, _tensors, errors, logs, metrics as _metrics
from .store import HostStore

_open_sessions = weakref.WeakSet()


@atexit.register
def _close_all():
    # Close before the interpreter tears down the ctypes callbacks that the
    # session's worker thread might still call.
    for s in list(_open_sessions):
        s.close()


def _config_source(config):
    """(yaml_path, yaml_text) for a path, YAML text or dict."""
    if isinstance(config, dict):
        return None, json.dumps(config)  # JSON is YAML (flow style)
    if isinstance(config, os.PathLike):
        return os.fspath(config), None
    if isinstance(config, bytes):
        config = config.decode()
    if not isinstance(config, str):
        raise TypeError("config must be a YAML path, YAML text or a dict, not %s"
                        % type(config).__name__)
    single_line = "\n" not in config.strip()
    if single_line and (os.path.exists(config) or config.endswith((".yaml", ".yml"))):
        return config, None
    return None, config


def new_job_id():
    """A fresh job id ("j" and 24 hex digits) for a launcher that starts every
    rank of a job itself: pass it to each rank (Session(job=...) or the
    DDPH_JOB_ID environment variable) so that the job meets no other."""
    return "j" + uuid.uuid4().hex[:24]


class Session:
    """A ddph session: the hook the config names, joined with the other ranks.

    config: a YAML file path, YAML text, or a dict of the same structure
        (docs/config.md), e.g. ``{"hook": {"family": "default", "name": "allreduce"}}``.
    rank, world_size: this process's place; by default from the YAML, then
        DDPH_RANK/DDPH_WORLD_SIZE, then RANK/WORLD_SIZE, else 0 of 1.
    rendezvous: overrides the YAML's comm.rendezvous ("file:///dir",
        "redis://host:port", "tcp://host:port" or "env://", where rank 0
        serves the store at that address or at MASTER_ADDR:MASTER_PORT as
        torchrun and ddph lab set them, or "host" for `store`).
    store: a host key-value store (e.g. a torch.distributed Store) used when
        the rendezvous is "host" or unset.
    job: the job id every store key lives under (1 to 64 of [A-Za-z0-9._-]);
        it overrides the YAML's comm.job. Without either: DDPH_JOB_ID, then
        torchrun's TORCHELASTIC_RUN_ID, then "default". Ranks of different
        jobs never meet; a launcher that starts every rank itself gives them
        ddphooks.new_job_id().
    comm: a host communicator (an object with a ``table`` attribute holding
        a ddph_comm_t, e.g. ddphooks.torch.ProcessGroupComm) used when the YAML
        says ``comm: {backend: host}``.
    device_allocator: a ddphooks.allocator.DeviceAllocator (e.g.
        ddphooks.torch.caching_allocator()) for the scratch of GPU buckets;
        None uses ddphooks' own pool.

    Opening is collective: every rank must open its session at the same time.
    """

    def __init__(self, config, *, rank=-1, world_size=-1, rendezvous=None, store=None,
                 comm=None, device_allocator=None, job=None):
        self._lib = _library.load()
        logs.refresh()  # the logger's level may have changed since the library loaded
        self._handle = None
        self._steps = _metrics.StepAccumulator()
        self._step = 0
        self._lock = threading.Lock()
        path, text = _config_source(config)
        self._store = None if store is None else (
            store if isinstance(store, HostStore) else HostStore(store))
        self._comm = comm  # keeps the host communicator's callbacks alive
        self._device_allocator = device_allocator  # and the allocator's
        # -1 (or None): from the YAML or the environment.
        rank = -1 if rank is None else _abi.checked_int(rank, "rank", _abi.INT32, low=-1)
        world_size = -1 if world_size is None else _abi.checked_int(
            world_size, "world_size", _abi.INT32, low=-1)
        opts = _abi.new(
            _abi.SessionOptions, yaml_path=_abi.checked_str(path, "config (a path)"),
            yaml_text=_abi.checked_str(text, "config"), rank=rank, world_size=world_size,
            rendezvous=_abi.checked_str(rendezvous, "rendezvous"),
            job=_abi.checked_str(job, "job"))
        if self._store is not None:
            opts.store = ctypes.pointer(self._store.table)
        if comm is not None:
            opts.comm = ctypes.pointer(comm.table)
        if device_allocator is not None:
            opts.device_allocator = ctypes.pointer(device_allocator.table)
        handle = ctypes.c_void_p()
        errors.check(self._lib, self._lib.ddph_session_open(ctypes.byref(opts),
                                                            ctypes.byref(handle)))
        self._handle = handle
        _open_sessions.add(self)

    # -- lifetime --------------------------------------------------------

    def close(self):
        """Waits for in-flight buckets and frees the session. Idempotent."""
        handle, self._handle = self._handle, None
        if handle:
            self._lib.ddph_session_close(handle)
        _open_sessions.discard(self)
        logs.drain()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _h(self):
        if not self._handle:
            raise ValueError("ddph session is closed")
        return self._handle

    @property
    def step(self):
        """Steps submitted so far (buckets with is_last)."""
        return self._step

    # -- buckets ---------------------------------------------------------

    def submit(self, bucket, on_done, keep):
        """Low level: submits a filled _abi.Bucket; on_done(error_or_None) runs on
        completion from any thread; `keep` stays alive until then."""
        key = _completion.register(on_done, keep)
        err = self._lib.ddph_session_submit(self._h(), ctypes.byref(bucket), _completion.DONE,
                                            ctypes.c_void_p(key))
        if err:
            _completion.cancel(key)
            errors.check(self._lib, err)

    def run(self, buffer, *, index=0, is_last=True, step=None, stream=None, params=None,
            param_ids=None, param_offsets=None):
        """Reduces `buffer` across ranks in place through the session's hook and
        returns it. `buffer`: a NumPy array, or any object with __dlpack__
        (torch.Tensor, CuPy, JAX), contiguous and writable. Blocks until done
        (on CUDA: until the result is ordered on `stream`, a cudaStream_t as an
        int, e.g. torch.cuda.current_stream().cuda_stream; None is the legacy
        default stream). Every rank must call run with equally sized buffers
        in the same order.

        params: the parameters whose gradients the buffer holds, in order, each
        the next block of the buffer: a shape (a tuple of ints), or the
        parameter itself (an array as above, float32 and contiguous) when the
        hook reads or writes it (hook_then_optimizer, model_averaging).
        Layer-wise PowerSGD compresses each parameter of two or more
        dimensions as a matrix; without params the bucket is one flat vector.
        param_ids: optional stable ids of those parameters (e.g. their index
        in the model), so per-parameter state follows a parameter whichever
        bucket it is in. param_offsets: optional element offset of each
        parameter's gradient in the buffer, in increasing order, where they
        do not follow each other (a host that aligns each gradient leaves
        gaps; the hooks reduce the gaps' elements as a flat part)."""
        index = _abi.checked_int(index, "index", _abi.UINT64)
        if step is not None:
            step = _abi.checked_int(step, "step", _abi.UINT64)
        if stream is not None:
            stream = _abi.checked_int(stream, "stream", _abi.POINTER_INT)
        view = _tensors.view_of(buffer)
        with self._lock:
            s = self._step if step is None else step
            if is_last and step is None:
                self._step += 1
        bucket = _abi.new(_abi.Bucket, index=index, step=s, is_last=1 if is_last else 0,
                          buffer=view.tensor, num_params=0, stream=stream)
        keep = [view, bucket]
        if params:
            _describe_params(bucket, view.numel, params, param_ids, keep, param_offsets)
        waiter = _completion.Waiter()
        self.submit(bucket, waiter, keep)
        try:
            waiter.wait()
        finally:
            logs.drain()  # the bucket's log lines are handled when run returns
        return buffer

    def flush(self):
        """Waits for every submitted bucket; raises the first error since the
        last flush."""
        try:
            errors.check(self._lib, self._lib.ddph_session_flush(self._h()))
        finally:
            logs.drain()

    # -- introspection and checkpoints -------------------------------------

    def stats(self):
        """A dict: steps, buckets, bytes_in, bytes_out, wire_bytes."""
        st = _abi.new(_abi.Stats)
        errors.check(self._lib, self._lib.ddph_session_stats(self._h(), ctypes.byref(st)))
        return {name: int(getattr(st, name)) for name, _ in _abi.Stats._fields_[1:]}

    def metrics(self, per_bucket=False):
        """The steps completed since the last call, as a list of
        ddphooks.metrics.StepMetrics (step, buckets, bytes_in, bytes_out,
        wire_bytes, compression, hook_seconds, queue_seconds, ok; with
        per_bucket=True also bucket_metrics, one BucketMetrics per bucket).
        The library keeps the latest 65536 buckets: call it at least that
        often. Buckets of a step not completed yet come with a later call."""
        with self._lock:  # one caller at a time keeps a step's buckets together
            return self._steps.steps(_metrics.take_records(self._lib, self._h()), per_bucket)

    def agree(self, what, value):
        """Collective: every rank passes `value`, bytes of one length on every
        rank (a digest of what must match, e.g. the layout of the gradients);
        raises DDPHError (INVALID_ARGUMENT) on every rank alike when some
        rank's value differs from rank 0's, naming those ranks and `what`.
        Waits for in-flight buckets first (flush)."""
        import numpy as np
        value = bytes(value)
        self.flush()
        comm = self._lib.ddph_session_comm(self._h()).contents
        world = comm.size(comm.ctx)
        mine = np.frombuffer(value, dtype=np.uint8).copy()
        everyone = np.zeros(world * len(value), dtype=np.uint8)
        send, recv = _tensors.view_of(mine), _tensors.view_of(everyone)
        errors.check(self._lib, comm.allgather(comm.ctx, ctypes.byref(send.tensor),
                                               ctypes.byref(recv.tensor), None))
        rows = everyone.reshape(world, len(value))
        differ = [r for r in range(1, world) if not np.array_equal(rows[r], rows[0])]
        if differ:
            raise errors.DDPHError(
                errors.Code.INVALID_ARGUMENT,
                "ddphooks: %s differs between ranks: rank%s %s against rank 0's"
                % (what, "s" if len(differ) > 1 else "", ", ".join(map(str, differ))))

    def spans(self):
        """The phases of its buckets the hooks reported since the last call
        (compress, collective, decompress, optimizer_step), as a list of
        ddphooks.metrics.PhaseSpan, times on time.monotonic_ns()'s clock.
        The library keeps the latest 262144; docs/metrics.md, "Traces"."""
        with self._lock:
            return _metrics.take_spans(self._lib, self._h())

    def state_dict(self):
        """The hooks' state as bytes (waits for in-flight buckets). Portable
        across ranks; load it with load_state_dict."""
        chunks = []

        def write(sink, data, n):
            chunks.append(ctypes.string_at(data, n))

        fn = _abi.WriteFn(write)
        errors.check(self._lib, self._lib.ddph_session_save_state(self._h(), fn, None))
        return b"".join(chunks)

    def load_state_dict(self, state):
        """Restores state from state_dict()'s bytes (a bytes-like object)."""
        data = bytes(state)
        buf = ctypes.create_string_buffer(data, len(data))
        errors.check(self._lib, self._lib.ddph_session_load_state(self._h(), buf, len(data)))


def _describe_params(bucket, numel, params, param_ids, keep, offsets=None):
    """Fills bucket.params (and param_ids) from run()'s params: shapes or
    arrays, each the next block of a buffer of numel elements, or at
    `offsets` when given."""
    if param_ids is not None and len(param_ids) != len(params):
        raise ValueError("param_ids has %d entries for %d params" % (len(param_ids), len(params)))
    if offsets is not None and len(offsets) != len(params):
        raise ValueError("param_offsets has %d entries for %d params" % (len(offsets), len(params)))
    entries = []
    offset = 0
    for i, p in enumerate(params):
        if offsets is not None:
            at = _abi.checked_int(offsets[i], "param_offsets[%d]" % i, _abi.INT64, low=0)
            if at < offset:
                raise ValueError("param_offsets[%d] is %d, inside params[%d], which ends at %d"
                                 % (i, at, i - 1, offset))
            offset = at
        dims = p if isinstance(p, (tuple, list)) else p.shape
        shape = tuple(_abi.checked_int(d, "params[%d]'s shape[%d]" % (i, k), _abi.INT64, low=0)
                      for k, d in enumerate(dims))
        count = 1
        for d in shape:
            count *= d
        if offset + count > numel:
            raise ValueError("params[%d] (shape %s) ends at element %d, past the buffer's %d"
                             % (i, shape, offset + count, numel))
        data = None
        if not isinstance(p, (tuple, list)):
            view = _tensors.view_of(p)
            keep.append(view)
            data = view.tensor
        entries.append((offset, shape, data))
        offset += count
    _tensors.describe_params(bucket, entries, param_ids, keep)


def version():
    """The loader's ABI version, e.g. "1.1"."""
    return _library.load().ddph_version().decode()
