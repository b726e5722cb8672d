"""One rank of the PyTorch parity runs (started twice by test_torch_parity.py).

    parity_ranks.py RANK WORLD INIT_FILE OUT_DIR CASE[,CASE...]

For every case, trains the same DDP model from the same seed for STEPS
steps twice: once with PyTorch's own hook (the reference), once with the
ddph hook through ddphooks.torch.register, and saves both runs' final
parameters (and any error) to OUT_DIR/<case>.rank<R>.pt. The test compares
them; nothing here decides pass or fail.
"""
import os
import pickle
import sys
import traceback

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ddphooks.torch  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import (  # noqa: E402
    debugging_hooks, default_hooks, optimizer_overlap_hooks, post_localSGD_hook,
    powerSGD_hook, quantization_hooks)

STEPS = 20
SEED = 1234
LR = 0.05
IN, HIDDEN, OUT, BATCH = 32, 64, 8, 16


def make_model(bias=True):
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(IN, HIDDEN, bias=bias), nn.ReLU(),
                         nn.Linear(HIDDEN, HIDDEN, bias=bias), nn.ReLU(),
                         nn.Linear(HIDDEN, OUT, bias=bias))


def batches(rank):
    g = torch.Generator().manual_seed(SEED + 7919 * (rank + 1))
    return [(torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g))
            for _ in range(STEPS)]


def flat_params(model):
    return torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])


def train(rank, register, *, bucket_view=False, step_optimizer=True, no_sync_every=0,
          bucket_cap_mb=0.01, resume_at=0, find_unused=False, bias=True, drop_state=False,
          nan_at=-1, optimizer=None):
    """Trains STEPS steps; register(ddp) installs a hook (or nothing). With
    resume_at, the run stops there, saves ddp.state_dict() and the ddph hook's
    state_dict() beside it, and goes on with a fresh model, DDP and hook
    loaded from them. optimizer(params) makes the optimizer (SGD at LR by
    default)."""
    make_opt = optimizer or (lambda params: torch.optim.SGD(params, lr=LR))
    model = make_model(bias)
    # A small bucket cap: several buckets per step once DDP rebuilds them.
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb, gradient_as_bucket_view=bucket_view,
              find_unused_parameters=find_unused)
    extra = register(ddp, None)
    opt = make_opt(model.parameters())
    for i, (x, y) in enumerate(batches(rank)):
        if resume_at and i == resume_at:
            checkpoint = {"model": ddp.state_dict()}
            restored = None
            if isinstance(extra, ddphooks.torch.DDPHook):
                # Through pickle, as torch.save writes it.
                hook_state = pickle.loads(pickle.dumps(extra.state_dict()))
                extra.close()
                if not drop_state:  # the control resumes without it, which must show
                    checkpoint["ddph"] = hook_state
            else:  # PyTorch's PowerSGDState pickles itself (its documented checkpoint)
                restored = pickle.loads(pickle.dumps(extra))
            model = make_model(bias)
            ddp = DDP(model, bucket_cap_mb=bucket_cap_mb, gradient_as_bucket_view=bucket_view,
              find_unused_parameters=find_unused)
            extra = register(ddp, restored)
            ddp.load_state_dict(checkpoint["model"])
            if "ddph" in checkpoint:
                extra.load_state_dict(checkpoint["ddph"])
            opt = make_opt(model.parameters())
        if i == nan_at:
            x = x * float("nan")
        if no_sync_every and i % no_sync_every == 0:
            with ddp.no_sync():  # accumulate locally, synchronize next step
                nn.functional.mse_loss(ddp(x), y).backward()
            continue
        nn.functional.mse_loss(ddp(x), y).backward()
        if step_optimizer:
            opt.step()
        opt.zero_grad(set_to_none=False)
    return flat_params(model), extra


def ddph(config):
    def reg(ddp, restored):
        return ddphooks.torch.register(ddp, config)
    return reg


def torch_hook(state, hook):
    def reg(ddp, restored):
        s = restored if restored is not None else state() if callable(state) else state
        ddp.register_comm_hook(s, hook)
        return s
    return reg


def no_hook(ddp, restored):
    return None


def _allgather(t):
    out = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
    return out


def _done(t):
    fut = torch.futures.Future()
    fut.set_result(t)
    return fut


# PyTorch 1.13's quantization hooks need CUDA (they call .cuda() and chain
# Gloo futures in a way Gloo does not serve). The references below are their
# formulas step for step, with PyTorch's own observers and quantize helpers,
# as torch ops on CPU with synchronous all_gathers. PyTorch 2 renamed the
# quantize helpers from _*_cuda to the device-agnostic _*_backend.
def _quantization_helper(name):
    return getattr(quantization_hooks, "_%s_backend" % name, None) or getattr(
        quantization_hooks, "_%s_cuda" % name)


def ref_per_tensor(process_group, bucket):
    rank, world = dist.get_rank(), dist.get_world_size()
    tensor = bucket.buffer()
    observer = torch.quantization.MinMaxObserver()
    observer(tensor)
    s, z = observer.calculate_qparams()
    all_s_and_z = _allgather(torch.FloatTensor([s, z]))
    quantized = _quantization_helper("quantize_per_tensor")(tensor, all_s_and_z[rank][0],
                                                            all_s_and_z[rank][1])
    total = torch.zeros_like(tensor, dtype=torch.float32)
    for r, q in enumerate(_allgather(quantized)):
        total += _quantization_helper("dequantize_per_tensor")(q, all_s_and_z[r][0],
                                                               all_s_and_z[r][1])
    return _done(total / world)


def ref_per_channel(bucket_size):
    def hook(process_group, bucket):
        rank, world = dist.get_rank(), dist.get_world_size()
        tensor = bucket.buffer()
        channels = nn.functional.pad(tensor, (0, bucket_size - len(tensor) % bucket_size),
                                     mode="constant", value=0).view(-1, bucket_size)
        observer = torch.quantization.PerChannelMinMaxObserver()
        observer(channels)
        s_ch, z_ch = observer.calculate_qparams()
        all_s_and_z = _allgather(torch.stack((s_ch, z_ch)))
        quantized = _quantization_helper("quantize_per_channel")(
            channels, all_s_and_z[rank][0, :], all_s_and_z[rank][1, :])
        total = torch.zeros_like(channels, dtype=torch.float32)
        for r, q in enumerate(_allgather(quantized)):
            scale, zero_point = all_s_and_z[r][0], all_s_and_z[r][1]
            x = torch.zeros_like(q, dtype=torch.float32)
            for i in range(x.size()[0]):  # _dequantize_per_channel_cuda, less .cuda()
                x[i, :] = scale[i] * (q[i, :].to(torch.float32) - zero_point[i])
            total += x
        return _done(torch.flatten(total)[: tensor.size()[0]] / world)
    return hook


def hook_config(family, name, options=None, wrap=None, comm=None):
    hook = {"family": family, "name": name, "options": options or {}}
    if wrap:
        hook["wrap"] = wrap
    cfg = {"hook": hook, "comm": {"backend": "gloo", "timeout": "60s"}}
    if comm:
        cfg["comm"] = comm
    return cfg


ALLREDUCE = hook_config("default", "allreduce")


def one_bucket_at_a_time(hook):
    """PyTorch's PowerSGD issues its later collectives from Gloo's callback
    threads, so with several buckets in flight the ranks can issue them in
    different orders (Gloo then aborts: "op.preamble.length <= op.nbytes").
    Waiting for each bucket inside the hook keeps one order; the numbers
    are the same."""
    def wrapped(state, bucket):
        fut = hook(state, bucket)
        fut.wait()
        return fut
    return wrapped


def powersgd_case(rank_, warm):
    def ref():
        return powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=rank_,
                                           start_powerSGD_iter=2, warm_start=warm,
                                           random_seed=0)
    cfg = hook_config("powersgd", "powersgd", {"rank": rank_, "start_iter": 2,
                                               "warm_start": warm, "seed": 0})
    return {"ref": torch_hook(ref, one_bucket_at_a_time(powerSGD_hook.powerSGD_hook)),
            "ddph": ddph(cfg)}


def hto_case():
    from torch.distributed.optim import _FunctionalSGD

    def ref():
        opt = _FunctionalSGD([], lr=LR, momentum=0.9, _allow_empty_param_list=True)
        return _HTO(opt)

    class _HTO:
        def __init__(self, opt):
            self.hook = optimizer_overlap_hooks._hook_then_optimizer(
                default_hooks.allreduce_hook, optimizer_overlap_hooks._OptimizerHookState(opt))

    def reg_ref(ddp, restored):
        h = ref()
        ddp.register_comm_hook(None, h.hook)

    cfg = hook_config("optimizer_overlap", "hook_then_optimizer",
                      {"optimizer": "sgd", "lr": LR, "momentum": 0.9},
                      wrap={"family": "default", "name": "allreduce"})
    # DDP rebuilds its buckets after the first step (several small buckets
    # here), moving parameters between buckets and positions; the adapter
    # passes each parameter's index as its id (ABI 1.2), so ddph's momentum
    # buffers follow their parameters as PyTorch's do.
    return {"ref": reg_ref, "ddph": ddph(cfg), "train": {"step_optimizer": False}}


def model_averaging_case():
    """Local SGD with periodic model averaging in PyTorch's order: step, then
    average. PyTorch: post_localSGD_hook, optimizer.step(), then a
    PeriodicModelAverager. ddph: model_averaging around hook_then_optimizer
    (which steps inside the hook, so the average follows the step) around
    post_localsgd."""
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from torch.distributed.optim import _FunctionalSGD

    def reg_ref(ddp, restored):
        groups = [dist.new_group([r]) for r in range(dist.get_world_size())]
        state = post_localSGD_hook.PostLocalSGDState(
            process_group=None, subgroup=groups[dist.get_rank()], start_localSGD_iter=5)
        opt = _FunctionalSGD([], lr=LR, _allow_empty_param_list=True)
        hook = optimizer_overlap_hooks._hook_then_optimizer(
            post_localSGD_hook.post_localSGD_hook,
            optimizer_overlap_hooks._OptimizerHookState(opt))
        averager = PeriodicModelAverager(period=4, warmup_steps=5)

        def hook_then_average(state_, bucket):
            # Waited for here, and averaged on this thread: PyTorch would run
            # the average from Gloo's callback thread, racing DDP's own
            # collectives (find_unused_parameters) for the same group.
            fut = hook(state_, bucket)
            fut.wait()
            if bucket.is_last():
                averager.average_parameters(ddp.module.parameters())
            return fut
        ddp.register_comm_hook(state, hook_then_average)

    cfg = hook_config("post_localsgd", "model_averaging", {"period": 4, "warmup_steps": 5},
                      wrap={"family": "optimizer_overlap", "name": "hook_then_optimizer",
                            "options": {"optimizer": "sgd", "lr": LR},
                            "wrap": {"family": "post_localsgd", "name": "post_localsgd",
                                     "options": {"start_localsgd_iter": 5,
                                                 "subgroup_size": 1}}})
    return {"ref": reg_ref, "ddph": ddph(cfg),
            "train": {"step_optimizer": False, "find_unused": True, "bucket_cap_mb": 25}}


def post_localsgd_case(comm=None):
    def reg_ref(ddp, restored):
        # Subgroups of one rank: after start_localSGD_iter, no communication.
        # (dist.new_subgroups refuses to run without CUDA; new_group does not.)
        groups = [dist.new_group([r]) for r in range(dist.get_world_size())]
        subgroup = groups[dist.get_rank()]
        state = post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=subgroup,
                                                     start_localSGD_iter=5)
        ddp.register_comm_hook(state, post_localSGD_hook.post_localSGD_hook)
    cfg = hook_config("post_localsgd", "post_localsgd",
                      {"start_localsgd_iter": 5, "subgroup_size": 1}, comm=comm)
    return {"ref": reg_ref, "ddph": ddph(cfg)}


def zero_case(name, options, comm=None):
    """The zero hooks against DDP with the plain, unsharded torch.optim
    optimizer (AdamW here). Small buckets, which DDP rebuilds after the
    first step: the hook re-cuts its shards then, keeping the state."""
    opts = {"optimizer": "adamw", "lr": 0.01, "weight_decay": 0.01}
    opts.update(options)
    cfg = hook_config("zero", name, opts, wrap={"family": "default", "name": "allreduce"},
                      comm=comm)
    return {"ref": no_hook, "ddph": ddph(cfg),
            "train": {"optimizer": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.01,
                                                                foreach=False)},
            "ddph_train": {"step_optimizer": False}}


CASES = {
    "allreduce": {"ref": torch_hook(None, default_hooks.allreduce_hook), "ddph": ddph(ALLREDUCE)},
    "allreduce_nohook": {"ref": no_hook, "ddph": ddph(ALLREDUCE)},
    "allreduce_bucket_view": {"ref": torch_hook(None, default_hooks.allreduce_hook),
                              "ddph": ddph(ALLREDUCE), "train": {"bucket_view": True}},
    "allreduce_no_sync": {"ref": no_hook, "ddph": ddph(ALLREDUCE),
                          "train": {"no_sync_every": 3}},
    "allreduce_host_comm": {"ref": torch_hook(None, default_hooks.allreduce_hook),
                            "ddph": ddph(hook_config("default", "allreduce",
                                                     comm={"backend": "host"}))},
    "fp16_compress": {"ref": torch_hook(None, default_hooks.fp16_compress_hook),
                      "ddph": ddph(hook_config("default", "fp16_compress"))},
    "noop": {"ref": torch_hook(None, debugging_hooks.noop_hook),
             "ddph": ddph(hook_config("debugging", "noop"))},
    "powersgd_r1_warm": powersgd_case(1, True),
    "powersgd_r1_cold": powersgd_case(1, False),
    "powersgd_r2_warm": powersgd_case(2, True),
    "powersgd_r2_cold": powersgd_case(2, False),
    "hook_then_optimizer": hto_case(),
    # Checkpoint at step 10 and resume in a fresh DDP: PyTorch pickles its
    # PowerSGDState, ddph's hook.state_dict() is saved beside ddp.state_dict(). One bucket of
    # bias-free layers: a fresh DDP's first-step layout (reverse parameter
    # order) then equals the rebuilt one (gradient-ready order), so the saved
    # per-bucket state fits the resumed run for PyTorch and ddph alike.
    "powersgd_resume": dict(powersgd_case(2, True),
                            train={"resume_at": 10, "bucket_cap_mb": 25, "bias": False}),
    "post_localsgd": post_localsgd_case(),
    "model_averaging": model_averaging_case(),
    # Subgroups through ProcessGroupComm.split (torch new_group).
    "post_localsgd_host_comm": post_localsgd_case({"backend": "host"}),
    # PyTorch's bf16 hook and batched PowerSGD fail on CPU/Gloo; the test
    # records that beside ddph's run, checked against DDP's plain average.
    "bf16_compress": {"ref": torch_hook(None, default_hooks.bf16_compress_hook),
                      "ddph": ddph(hook_config("default", "bf16_compress")), "base": no_hook},
    "batched_powersgd": {
        "ref": torch_hook(lambda: powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2),
            powerSGD_hook.batched_powerSGD_hook),
        "ddph": ddph(hook_config("powersgd", "batched_powersgd",
                                 {"rank": 1, "start_iter": 2})),
        "base": no_hook},
    "powersgd_resume_without_state": dict(powersgd_case(2, True), train={
        "resume_at": 10, "bucket_cap_mb": 25, "bias": False, "drop_state": True}),
    "per_tensor": {"ref": torch_hook(None, ref_per_tensor),
                   "ddph": ddph(hook_config("quantization", "per_tensor"))},
    # The same through DDP's own process group (comm: {backend: host}):
    # allgather and allreduce of ddphooks.torch.ProcessGroupComm.
    "per_tensor_host_comm": {"ref": torch_hook(None, ref_per_tensor),
                             "ddph": ddph(hook_config("quantization", "per_tensor",
                                                      comm={"backend": "host"}))},
    "powersgd_host_comm": {
        "ref": powersgd_case(2, True)["ref"],
        "ddph": ddph(hook_config("powersgd", "powersgd",
                                 {"rank": 2, "start_iter": 2, "warm_start": True, "seed": 0},
                                 comm={"backend": "host"}))},
    # A ddph error inside the hook: loss.backward() raises with its text.
    "nonfinite_error": {"ddph": ddph(hook_config("quantization", "per_channel",
                                                 {"nonfinite": "error"})),
                        "train": {"nan_at": 3}},
    "zero_reduce_scatter": zero_case("zero_step_interleaved", {"protocol": "reduce_scatter"}),
    "zero_allreduce": zero_case("zero_step", {"protocol": "allreduce"}),
    # The adapter's ZeroRedundancyOptimizer-like entry point (DDP's own
    # process group, zero_step_interleaved, reduce_scatter).
    "zero_sharded_optimizer": dict(zero_case("", {}), ddph=lambda ddp, restored:
                                   ddphooks.torch.sharded_optimizer(
                                       ddp, "adamw", lr=0.01, weight_decay=0.01)),
    # Reduce-scatter and allgather through DDP's own process group.
    "zero_host_comm": zero_case("zero_step", {"protocol": "reduce_scatter"},
                                comm={"backend": "host"}),
    "per_channel": {"ref": torch_hook(None, ref_per_channel(512)),
                    "ddph": ddph(hook_config("quantization", "per_channel",
                                             {"channel_size": 512}))},
}


def main():
    rank, world, init_file, out_dir, names = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                              sys.argv[4], sys.argv[5].split(","))
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    torch.set_num_threads(1)
    for name in names:
        case = CASES[name]
        result = {}
        for variant in ("ref", "ddph", "base"):
            if variant not in case:
                continue
            try:
                kwargs = dict(case.get("train", {}), **case.get(variant + "_train", {}))
                params, extra = train(rank, case[variant], **kwargs)
                result[variant] = params
                if variant == "ddph" and extra is not None:
                    result["stats"] = extra.stats()
                    extra.close()
            except Exception:
                result[variant + "_error"] = traceback.format_exc()
            dist.barrier()
        torch.save(result, os.path.join(out_dir, "%s.rank%d.pt" % (name, rank)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
