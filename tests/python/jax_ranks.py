"""The rank side of test_jax_reducer.py: ddphooks.jax.GradientReducer on one
rank of a JAX job (CPU, no PyTorch).

    jax_ranks.py RANK WORLD INIT_FILE OUT_DIR CASES COORDINATOR_PORT

Each case opens its own session (job id: the case's name) on a file store in
OUT_DIR and saves NumPy results with pickle (ranks.run_cases_without_torch).
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import ranks  # noqa: E402
import ddphooks.errors  # noqa: E402
import ddphooks.jax  # noqa: E402

RANK, WORLD, OUT = 0, 1, None  # set by main from argv


def config(family, name, options=None, **extra):
    cfg = {"comm": {"backend": "gloo", "rendezvous": "file://" + os.path.join(OUT, "store"),
                    "timeout": "20s"},
           "hook": {"family": family, "name": name, "options": options or {}}}
    cfg["hook"].update(extra)
    return cfg


def reducer(case, cfg, **kw):
    return ddphooks.jax.GradientReducer(cfg, rank=RANK, world_size=WORLD, job=case, **kw)


def gradients(rank, step=0):
    """A pytree of every kind of node: dicts, a list, a tuple, a 0-d leaf,
    lengths that are not multiples of 16, a matrix PowerSGD compresses.
    numpy_gradients() gives the same values as NumPy arrays."""
    return _gradients(rank, step, jnp.asarray)


def numpy_gradients(rank, step=0):
    return _gradients(rank, step, lambda a: a)


def _gradients(rank, step, wrap):
    rng = np.random.default_rng(1000 * step + rank)

    def normal(*shape):
        return wrap(rng.standard_normal(shape, dtype=np.float32))
    return {"dense": {"w": normal(64, 48), "b": normal(48)},
            "stack": [normal(3, 5), (normal(), normal(17))],
            "out": normal(48, 10)}


def numpy_tree(tree):
    return jax.tree_util.tree_map(np.asarray, tree)


def case_allreduce(rank):
    # 0.004 MB buckets: the pytree spans several.
    with reducer("allreduce", config("default", "allreduce"), bucket_cap_mb=0.004) as red:
        out = [numpy_tree(red.reduce(gradients(rank, s))) for s in range(2)]
        aligned = all(leaf.unsafe_buffer_pointer() % 64 == 0
                      for leaf in jax.tree_util.tree_leaves(red.reduce(gradients(rank, 2))))
        return {"out": out, "stats": red.stats(), "aligned": aligned}


def case_pytree_mismatch(rank):
    grads = gradients(rank)
    if rank == 1:
        grads["extra"] = jnp.ones(3)
    with reducer("mismatch", config("default", "allreduce")) as red:
        try:
            red.reduce(grads)
        except ddphooks.errors.DDPHError as e:
            return {"raised": str(e)}
    return {"raised": None}


def case_bad_dtype(rank):
    grads = {"w": jnp.ones(4), "steps": jnp.arange(3)}
    with reducer("bad_dtype", config("default", "allreduce")) as red:
        try:
            red.reduce(grads)
        except ddphooks.errors.DDPHError as e:
            return {"raised": str(e), "buckets": red.stats()["buckets"]}
    return {"raised": None}


Q4EF = ("quantization", "per_channel", {"protocol": "reduce_scatter", "bits": 4,
                                        "channel_size": 16, "error_feedback": True})


def case_resume(rank):
    """3 steps of 4-bit with error feedback; the same with the state saved
    after step 1 and loaded into a fresh reducer; and without loading it."""
    steps = [gradients(rank, s) for s in range(3)]
    with reducer("resume_whole", config(*Q4EF)) as red:
        whole = [numpy_tree(red.reduce(g)) for g in steps]
    with reducer("resume_first", config(*Q4EF)) as red:
        red.reduce(steps[0])
        state = red.state_dict()
    with reducer("resume_rest", config(*Q4EF)) as red:
        red.load_state_dict(state)
        resumed = [numpy_tree(red.reduce(g)) for g in steps[1:]]
    with reducer("resume_fresh", config(*Q4EF)) as red:
        fresh = [numpy_tree(red.reduce(g)) for g in steps[1:]]
    return {"whole": whole, "resumed": resumed, "fresh": fresh, "state_bytes": len(state["state"])}


def case_powersgd(rank):
    cfg = config("powersgd", "powersgd", {"rank": 2, "start_iter": 2})
    with reducer("powersgd", cfg) as red:
        out = [numpy_tree(red.reduce(gradients(rank, s))) for s in range(3)][-1]
        return {"out": out, "stats": red.stats()}


def case_zero_adamw(rank):
    """The zero hook's AdamW, stepped through step(), against optax.adamw on
    the ranks' mean gradient."""
    import optax
    params = {"w": jnp.asarray(np.linspace(-1, 1, 64 * 48, dtype=np.float32).reshape(64, 48)),
              "b": jnp.zeros(48)}
    cfg = config("zero", "zero_step", {"optimizer": "adamw", "lr": 0.01, "weight_decay": 0.01,
                                       "protocol": "reduce_scatter"},
                 wrap={"family": "default", "name": "allreduce"})
    with reducer("zero", cfg) as red:
        stepped = params
        for s in range(3):
            g = gradients(rank, s)
            stepped = red.step(stepped, {"w": g["dense"]["w"], "b": g["dense"]["b"]})
        ours = numpy_tree(stepped)
    opt = optax.adamw(0.01, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)
    state, ref = opt.init(params), params
    for s in range(3):
        per_rank = [gradients(r, s)["dense"] for r in range(WORLD)]
        mean = {k: sum(np.asarray(g[k]) for g in per_rank) / WORLD for k in ("w", "b")}
        updates, state = opt.update(jax.tree_util.tree_map(jnp.asarray, mean), state, ref)
        ref = optax.apply_updates(ref, updates)
    return {"ours": ours, "optax": numpy_tree(ref)}


def case_jax_pmean(rank):
    """JAX's own cross-process mean (its Gloo CPU collectives) of the same
    gradients, in a process of its own: jax.distributed must start before
    any other JAX call."""
    from jax.sharding import NamedSharding, PartitionSpec as P
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address="127.0.0.1:%s" % sys.argv[6],
                               num_processes=WORLD, process_id=rank)
    mesh = jax.make_mesh((WORLD,), ("i",))
    mean = jax.jit(jax.shard_map(lambda x: jax.lax.pmean(x, "i"), mesh=mesh, in_specs=P("i"),
                                 out_specs=P("i")))
    out = []
    for s in range(2):
        leaves, treedef = jax.tree_util.tree_flatten(gradients(rank, s))
        reduced = []
        for leaf in leaves:
            local = jax.device_put(leaf[None], jax.local_devices()[0])
            whole = jax.make_array_from_single_device_arrays(
                (WORLD,) + leaf.shape, NamedSharding(mesh, P("i")), [local])
            reduced.append(np.asarray(mean(whole).addressable_shards[0].data)[0])
        out.append(jax.tree_util.tree_unflatten(treedef, reduced))
    return {"out": out}


CASES = {"allreduce": case_allreduce, "pytree_mismatch": case_pytree_mismatch,
         "bad_dtype": case_bad_dtype, "resume": case_resume, "powersgd": case_powersgd,
         "zero_adamw": case_zero_adamw, "jax_pmean": case_jax_pmean}

if __name__ == "__main__":
    RANK, WORLD, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4]
    chosen = sys.argv[5].split(",")
    if "jax_pmean" in chosen and chosen != ["jax_pmean"]:
        sys.exit("jax_pmean runs alone: jax.distributed must start before any other JAX call")
    ranks.run_cases_without_torch({name: CASES[name] for name in chosen}, sys.argv)
