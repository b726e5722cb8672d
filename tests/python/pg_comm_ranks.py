"""One rank of test_torch_comm.py: drives ddphooks.torch.ProcessGroupComm's
ddph_comm_t table through its C function pointers, as a hook would, and
checks every collective against torch arithmetic on the gathered inputs.

    pg_comm_ranks.py RANK WORLD INIT_FILE
"""
import ctypes
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ddphooks import _abi, _library, _tensors, errors  # noqa: E402
from ddphooks.torch import ProcessGroupComm  # noqa: E402


def dl(t):
    """(DLTensor, keepalive) describing contiguous torch tensor t."""
    shape = (ctypes.c_int64 * 1)(t.numel())
    d = _abi.DLTensor()
    _tensors.fill_from_torch(d, t, shape)
    return d, shape


def call(fn, *args):
    err = fn(*args)
    errors.check(_library.load(), err)


def inputs(rank, n, dtype):
    g = torch.Generator().manual_seed(100 + rank)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


def main():
    rank, world, init = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world)
    comm = ProcessGroupComm(dist.distributed_c10d._get_default_group())
    t = comm.table
    assert t.rank(None) == rank and t.size(None) == world
    n = 37
    for dtype in (torch.float32, torch.int32):
        all_in = [inputs(r, n, dtype) for r in range(world)]
        mine = all_in[rank]
        ops = {_abi.DDPH_SUM: sum(all_in), _abi.DDPH_MAX: torch.stack(all_in).max(0).values,
               _abi.DDPH_MIN: torch.stack(all_in).min(0).values}
        if dtype.is_floating_point:  # divide first, in the dtype, then sum (the ABI's AVG)
            ops[_abi.DDPH_AVG] = sum(x / world for x in all_in)
        else:
            ops[_abi.DDPH_AVG] = sum(torch.div(x, world, rounding_mode="trunc") for x in all_in)
        for op, want in ops.items():
            # out of place, then in place
            recv = torch.empty_like(mine)
            s, k1 = dl(mine)
            r, k2 = dl(recv)
            call(t.allreduce, None, ctypes.byref(s), ctypes.byref(r), op, None)
            assert torch.equal(recv, want), (dtype, op, recv[:4], want[:4])
            buf = mine.clone()
            b, k3 = dl(buf)
            call(t.allreduce, None, ctypes.byref(b), ctypes.byref(b), op, None)
            assert torch.equal(buf, want), (dtype, op, "in place")
            # reduce_scatter: rank r gets block r of the reduction of world blocks
            big = torch.cat([mine] * world)
            part = torch.empty_like(mine)
            s2, k4 = dl(big)
            r2, k5 = dl(part)
            call(t.reduce_scatter, None, ctypes.byref(s2), ctypes.byref(r2), op, None)
            assert torch.equal(part, want), (dtype, op, "reduce_scatter")
        gathered = torch.empty(world * n, dtype=dtype)
        s, k1 = dl(mine)
        r, k2 = dl(gathered)
        call(t.allgather, None, ctypes.byref(s), ctypes.byref(r), None)
        assert torch.equal(gathered, torch.cat(all_in)), "allgather"
        for root in range(world):
            buf = mine.clone()
            b, k3 = dl(buf)
            call(t.broadcast, None, ctypes.byref(b), root, None)
            assert torch.equal(buf, all_in[root]), "broadcast"
    call(t.barrier, None)
    # point to point: a ring
    if world > 1:
        out = torch.full((5,), float(rank))
        got = torch.empty(5)
        o, k1 = dl(out)
        g, k2 = dl(got)
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        if rank % 2 == 0:
            call(t.send, None, ctypes.byref(o), nxt, None)
            call(t.recv, None, ctypes.byref(g), prv, None)
        else:
            call(t.recv, None, ctypes.byref(g), prv, None)
            call(t.send, None, ctypes.byref(o), nxt, None)
        assert torch.equal(got, torch.full((5,), float(prv))), "send/recv"
    # alltoallv: rank r sends (2r + p) % 4 elements to rank p (uneven, with
    # empty blocks), valued 100 r + 10 p + i; through the whole job, then
    # below through a split group whose rank order is the job's reversed.
    def check_alltoallv(table, me, ranks, label):
        sc = (ctypes.c_int64 * ranks)(*[(2 * me + p) % 4 for p in range(ranks)])
        rc = (ctypes.c_int64 * ranks)(*[(2 * p + me) % 4 for p in range(ranks)])
        out = torch.cat([torch.tensor([100.0 * me + 10 * p + i for i in range(sc[p])])
                         for p in range(ranks)])
        got = torch.full((sum(rc),), -1.0)
        o, k1 = dl(out)
        g, k2 = dl(got)
        call(table.alltoallv, None, ctypes.byref(o), sc, ctypes.byref(g), rc, None)
        want = torch.cat([torch.tensor([100.0 * p + 10 * me + i for i in range(rc[p])])
                          for p in range(ranks)])
        assert torch.equal(got, want), (label, got, want)

    assert t.struct_size >= ctypes.sizeof(_abi.Comm) and t.alltoallv
    check_alltoallv(t, rank, world, "alltoallv")
    # split: one group of everyone with the keys reversed (rank order flips),
    # then groups of one, then a rank that joins none.
    sub_ptr = ctypes.c_void_p()
    call(t.split, None, 0, world - rank, ctypes.byref(sub_ptr))
    sub = ctypes.cast(sub_ptr, ctypes.POINTER(_abi.Comm)).contents
    assert sub.size(None) == world and sub.rank(None) == world - 1 - rank
    mine = torch.tensor([float(rank)] * 3)
    gathered = torch.empty(3 * world)
    s, k1 = dl(mine)
    r, k2 = dl(gathered)
    call(sub.allgather, None, ctypes.byref(s), ctypes.byref(r), None)
    want = torch.cat([torch.full((3,), float(world - 1 - i)) for i in range(world)])
    assert torch.equal(gathered, want), ("split allgather in key order", gathered)
    buf = torch.tensor([float(rank)] * 2)
    b, k3 = dl(buf)
    call(sub.broadcast, None, ctypes.byref(b), 0, None)  # sub rank 0 is world rank world-1
    assert torch.equal(buf, torch.full((2,), float(world - 1))), ("split broadcast", buf)
    check_alltoallv(sub, world - 1 - rank, world, "split alltoallv")
    sub.destroy(sub.ctx)
    call(t.split, None, rank, 0, ctypes.byref(sub_ptr))
    one = ctypes.cast(sub_ptr, ctypes.POINTER(_abi.Comm)).contents
    assert one.size(None) == 1 and one.rank(None) == 0
    x = torch.tensor([1.0, 2.0])
    xd, k4 = dl(x)
    call(one.allreduce, None, ctypes.byref(xd), ctypes.byref(xd), _abi.DDPH_AVG, None)
    assert torch.equal(x, torch.tensor([1.0, 2.0]))
    one.destroy(one.ctx)
    call(t.split, None, -1 if rank == 0 else 0, 0, ctypes.byref(sub_ptr))
    if rank == 0:
        assert not sub_ptr.value, "a negative color joins no group"
    else:
        rest = ctypes.cast(sub_ptr, ctypes.POINTER(_abi.Comm)).contents
        assert rest.size(None) == world - 1
        rest.destroy(rest.ctx)
    # an error comes back as a ddph error, not an exception through C
    bad = torch.zeros(3, dtype=torch.float32)
    b, k = dl(bad)
    err = t.allreduce(None, ctypes.byref(b), ctypes.byref(b), 77, None)
    e = errors.take(_library.load(), err)
    assert e is not None and "torch process group allreduce" in e.message, e
    # The adapter refuses the mixed_precision family: it would write fp32
    # gradients into the tensors DDP lends, which are the parameters.
    import ddphooks.torch
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    before = [p.detach().clone() for p in ddp.parameters()]
    try:
        ddphooks.torch.register(ddp, {"hook": {"family": "mixed_precision",
                                               "name": "allreduce_upcast"}})
        raise AssertionError("mixed_precision was accepted")
    except errors.DDPHError as e:
        assert e.code == errors.Code.UNSUPPORTED and "mixed_precision" in e.message, e
    # ... and quantization/per_channel_gather, which gathers rows (FSDP2's
    # weights) and leaves no mean in a gradient bucket.
    try:
        ddphooks.torch.register(ddp, {"hook": {"family": "quantization",
                                               "name": "per_channel_gather"}})
        raise AssertionError("per_channel_gather was accepted as a DDP hook")
    except errors.DDPHError as e:
        assert e.code == errors.Code.UNSUPPORTED and "no mean" in e.message, e
        assert "weights=" in e.message, e
    assert all(torch.equal(a, b) for a, b in zip(before, ddp.parameters()))
    dist.barrier()
    print("rank %d: ok" % rank)


if __name__ == "__main__":
    main()
