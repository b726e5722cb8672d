"""A ddph_comm_t over a torch.distributed ProcessGroup (``comm: {backend: host}``)."""
import ctypes

import torch
import torch.distributed as dist

from .. import _abi, _library, _tensors, errors

__all__ = ["ProcessGroupComm"]



class ProcessGroupComm:
    """A host communicator whose collectives run on a torch ProcessGroup.

    The session calls it from its worker thread, one collective at a time.
    AVG follows the ABI's divide-first definition (PyTorch's allreduce_hook
    numerics): each rank's value is divided by the world size, then summed.
    reduce_scatter, which Gloo lacks, is an allreduce of a copy. alltoallv
    (ABI 1.1) is the group's alltoall_base, so that hooks which exchange
    chunks (quantization's reduce_scatter protocol) run on CUDA buckets too:
    without it they fall back to send/recv, which takes host memory only.
    ``split``
    makes sub-communicators with torch.distributed.new_group, which every
    process of the job must enter: it is offered when the group spans the
    whole job (the default).

    `order` (for split children): order[i] is the process-group rank of this
    communicator's rank i (ranks ordered by split key, while a torch group
    orders its members by global rank).
    """

    def __init__(self, process_group, order=None):
        self.pg = process_group
        self.size = process_group.size()
        self.order = list(order) if order is not None else list(range(self.size))
        self.rank = self.order.index(process_group.rank())
        self._children = {}
        self._ops = {_abi.DDPH_SUM: dist.ReduceOp.SUM, _abi.DDPH_MAX: dist.ReduceOp.MAX,
                     _abi.DDPH_MIN: dist.ReduceOp.MIN}
        f = self._fns = dict(
            rank=_abi.CommIntFn(lambda ctx: self.rank),
            size=_abi.CommIntFn(lambda ctx: self.size),
            allreduce=_abi.CommReduceFn(self._guard(self._allreduce)),
            allgather=_abi.CommGatherFn(self._guard(self._allgather)),
            reduce_scatter=_abi.CommReduceFn(self._guard(self._reduce_scatter)),
            broadcast=_abi.CommBroadcastFn(self._guard(self._broadcast)),
            barrier=_abi.CommBarrierFn(self._guard(self._barrier, stream_arg=False)),
            send=_abi.CommP2PFn(self._guard(self._send)),
            recv=_abi.CommP2PFn(self._guard(self._recv)),
            destroy=_abi.CommDestroyFn(lambda ctx: None),
            alltoallv=_abi.CommAlltoallvFn(self._guard(self._alltoallv)),
        )
        if self._spans_job():
            f["split"] = _abi.CommSplitFn(self._guard(self._split, stream_arg=False))
        self.table = _abi.new(_abi.Comm, ctx=None, **f)

    def _spans_job(self):
        try:
            return dist.is_initialized() and self.pg.size() == dist.get_world_size()
        except Exception:
            return False

    # Each entry: run under the bucket's CUDA stream, and turn any Python
    # exception into a ddph error (no exception may unwind into C).
    def _guard(self, fn, stream_arg=True):
        name = fn.__name__.lstrip("_")

        def entry(ctx, *args):
            try:
                stream = args[-1] if stream_arg else None
                if stream:
                    with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
                        fn(*args)
                else:
                    fn(*args)
                return None
            except BaseException as e:  # noqa: B902 - must not reach C
                text = str(e)
                if isinstance(e, (TypeError, ValueError, KeyError)):
                    code = errors.Code.UNSUPPORTED
                elif "timeout" in text.lower() or "timed out" in text.lower():
                    code = errors.Code.TIMEOUT
                else:
                    code = errors.Code.COMM_FAILURE
                return errors.make(_library.load(), code, "torch process group %s: %s: %s" %
                                   (name, type(e).__name__, text))
        return entry

    def _divide(self, src, dst):
        if dst.is_floating_point():
            torch.div(src, self.size, out=dst)
        else:
            torch.div(src, self.size, rounding_mode="trunc", out=dst)

    def _reduce(self, t, op):
        """Reduces t in place (AVG: t already divided)."""
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.SUM if op == _abi.DDPH_AVG else self._ops[op]
        self.pg.allreduce([t], opts).wait()

    def _allreduce(self, send, recv, op, stream):
        s, r = _tensors.torch_view(send), _tensors.torch_view(recv)
        if op == _abi.DDPH_AVG:
            self._divide(s, r)
        elif r.data_ptr() != s.data_ptr():
            r.copy_(s)
        self._reduce(r, op)

    def _allgather(self, send, recv, stream):
        s, r = _tensors.torch_view(send), _tensors.torch_view(recv)
        blocks = r.chunk(self.size)  # block i belongs to this communicator's rank i
        outs = [None] * self.size
        for i, pg_rank in enumerate(self.order):
            outs[pg_rank] = blocks[i]
        self.pg.allgather([outs], [s]).wait()

    def _reduce_scatter(self, send, recv, op, stream):
        s, r = _tensors.torch_view(send), _tensors.torch_view(recv)
        t = torch.empty_like(s)
        if op == _abi.DDPH_AVG:
            self._divide(s, t)
        else:
            t.copy_(s)
        self._reduce(t, op)
        n = r.numel()
        r.copy_(t[self.rank * n:(self.rank + 1) * n])

    def _broadcast(self, buf, root, stream):
        opts = dist.BroadcastOptions()
        opts.rootRank = self.order[root]
        opts.rootTensor = 0
        self.pg.broadcast([_tensors.torch_view(buf)], opts).wait()

    def _barrier(self):
        self.pg.barrier().wait()

    def _send(self, buf, peer, stream):
        self.pg.send([_tensors.torch_view(buf)], self.order[peer], 0).wait()

    def _recv(self, buf, peer, stream):
        self.pg.recv([_tensors.torch_view(buf)], self.order[peer], 0).wait()

    def _alltoallv(self, send, send_counts, recv, recv_counts, stream):
        s, r = _tensors.torch_view(send), _tensors.torch_view(recv)
        sc = [int(send_counts[i]) for i in range(self.size)]
        rc = [int(recv_counts[i]) for i in range(self.size)]
        opts = dist.AllToAllOptions()
        if self.order == list(range(self.size)):
            self.pg.alltoall_base(r, s, rc, sc, opts).wait()
            return
        # Blocks are in this communicator's rank order; the group orders them
        # by its own ranks (order[i] is the group rank of rank i).
        pg_send, pg_sc, pg_rc = [None] * self.size, [0] * self.size, [0] * self.size
        for i, (block, g) in enumerate(zip(s.split(sc), self.order)):
            pg_send[g], pg_sc[g], pg_rc[g] = block, sc[i], rc[i]
        got = torch.empty_like(r)
        self.pg.alltoall_base(got, torch.cat(pg_send), pg_rc, pg_sc, opts).wait()
        blocks = got.split(pg_rc)
        r.copy_(torch.cat([blocks[g] for g in self.order]))

    def _split(self, color, key, out):
        # Everyone's (color, key), in this communicator's rank order.
        mine = torch.tensor([color, key], dtype=torch.int64)
        all_ck = torch.empty(self.size * 2, dtype=torch.int64)
        ck = _abi.DLTensor()
        ck_shape = (ctypes.c_int64 * 1)(2)
        _tensors.fill_from_torch(ck, mine, ck_shape)
        all_dl = _abi.DLTensor()
        all_shape = (ctypes.c_int64 * 1)(self.size * 2)
        _tensors.fill_from_torch(all_dl, all_ck, all_shape)
        self._allgather(ctypes.pointer(ck), ctypes.pointer(all_dl), None)
        pairs = all_ck.view(self.size, 2).tolist()
        colors = sorted({c for c, _ in pairs if c >= 0})
        made = None
        # new_group is collective over the whole job: every process makes
        # every group, in the same order, and keeps its own.
        for c in colors:
            members = sorted((k, i) for i, (cc, k) in enumerate(pairs) if cc == c)
            by_key = [self._global(self.order[i]) for _, i in members]
            group = dist.new_group(ranks=sorted(by_key))
            if c == color:
                sorted_globals = sorted(by_key)
                made = ProcessGroupComm(group, order=[sorted_globals.index(g) for g in by_key])
        slot = ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))
        if made is None:
            slot[0] = None
            return
        self._children[id(made)] = made
        made._fns["destroy"] = _abi.CommDestroyFn(
            lambda ctx, k=id(made): self._children.pop(k, None))
        made.table.destroy = made._fns["destroy"]
        slot[0] = ctypes.addressof(made.table)

    def _global(self, pg_rank):
        if self.pg is dist.distributed_c10d._get_default_group():
            return pg_rank
        return dist.distributed_c10d.get_global_rank(self.pg, pg_rank)
