"""One rank of test_torch_compile.py (PyTorch 2 only; started twice).

    compile_ranks.py RANK WORLD INIT_FILE OUT_DIR

Trains one DDP model from the same seed, the ranks on different data, in
each of these ways, and saves the final parameters, the ddph hook's stats
and any error per case to OUT_DIR/<case>.rank<R>.pt (the test compares):
  eager_<hook>, compiled_<hook>   eager DDP and torch.compile(ddp) (the
                                  default DDPOptimizer path, inductor)
  aot_eager_<hook>                torch.compile(ddp, backend="aot_eager")
  compiled_autograd_allreduce     the same, each backward under compiled
                                  autograd (PyTorch 2.15 refuses it)
  python_reducer                  DDP built under optimize_ddp =
                                  "python_reducer": register()'s error
"""
import os
import sys

import torch
import torch._dynamo
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity_ranks as pr  # noqa: E402  (the seed, the data, hook_config)
import ranks  # noqa: E402
import ddphooks.torch  # noqa: E402

STEPS = 6
WIDTH = 512  # 1 MiB layers: DDPOptimizer needs buckets of at least 1 MiB, so 3+ buckets

HOOKS = {
    "nohook": None,  # DDP's own C++ allreduce: the control
    "allreduce": pr.ALLREDUCE,
    "fp16": pr.hook_config("default", "fp16_compress"),
    "q8": pr.hook_config("quantization", "per_channel",
                         {"protocol": "reduce_scatter", "bits": 8}),
}


class MLP(nn.Module):
    """A model class of the user's own, as DDP models are: Dynamo compiles a
    forward in user code, while nn.Sequential's, called from DDP's own
    (skipped) frames, would run eagerly."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(pr.IN, WIDTH), nn.Linear(WIDTH, WIDTH),
                                     nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, pr.OUT)])

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def make_model():
    torch.manual_seed(pr.SEED)
    return MLP()


def counting_graphs(name, graphs):
    """Dynamo backend `name`, counting the graphs it compiles: DDPOptimizer
    hands it one per bucket, so several prove both that the model was
    compiled and that the graph was split at bucket boundaries."""
    compile_graph = torch._dynamo.lookup_backend(name)

    def backend(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return compile_graph(gm, example_inputs)
    return backend


def train(rank, config, backend=None, compiled_autograd=False):
    """backend: None (eager DDP), "inductor" (torch.compile's default) or
    "aot_eager" (the same graphs and autograd, run by eager kernels).
    compiled_autograd: each backward under compiled autograd."""
    torch._dynamo.reset()  # each case compiles afresh (and never meets the recompile limit)
    model = make_model()
    ddp = DDP(model, bucket_cap_mb=1)
    hook = ddphooks.torch.register(ddp, config) if config else None
    graphs = []
    step = torch.compile(ddp, backend=counting_graphs(backend, graphs)) if backend else ddp
    opt = torch.optim.SGD(model.parameters(), lr=pr.LR)
    for x, y in pr.batches(rank)[:STEPS]:
        loss = nn.functional.mse_loss(step(x), y)
        if compiled_autograd:
            with torch._dynamo.compiled_autograd._enable(torch.compile(backend="eager")):
                loss.backward()
        else:
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    result = {"params": pr.flat_params(model), "graphs": len(graphs)}
    if hook is not None:
        result["stats"] = hook.stats()
        hook.close()
    return result


def python_reducer_refusal():
    with torch._dynamo.config.patch(optimize_ddp="python_reducer"):
        ddp = DDP(make_model(), bucket_cap_mb=1)
        try:
            ddphooks.torch.register(ddp, pr.ALLREDUCE)
        except ddphooks.errors.DDPHError as e:
            return {"refused": str(e)}
        return {"registered": True}


def cases():
    out = {}
    for name, cfg in HOOKS.items():
        out["eager_" + name] = lambda rank, cfg=cfg: train(rank, cfg)
        out["compiled_" + name] = lambda rank, cfg=cfg: train(rank, cfg, "inductor")
        out["aot_eager_" + name] = lambda rank, cfg=cfg: train(rank, cfg, "aot_eager")

    out["compiled_autograd_allreduce"] = lambda rank: train(rank, pr.ALLREDUCE, "inductor",
                                                            compiled_autograd=True)
    out["python_reducer"] = lambda rank: python_reducer_refusal()
    return out


if __name__ == "__main__":
    ranks.run_cases(cases(), sys.argv)
