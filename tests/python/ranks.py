"""What the multi-rank Python tests share: starting a rank script once per
rank and reading back what each rank saved (the test side), and running
named cases on a rank (the script side).

A rank script takes RANK WORLD INIT_FILE OUT_DIR [more...] and saves one
OUT_DIR/<case>.rank<R>.pt per case (torch.save; .pkl, pickle, for scripts
without PyTorch): a dict of results, or {"error": the traceback}.
"""
import os
import pickle
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_load(path):
    import torch
    try:
        return torch.load(path, weights_only=False)  # PyTorch 2 (tracebacks are strings)
    except TypeError:
        return torch.load(path)  # 1.13 has no weights_only


def pickle_load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def spawn(script, world, out, *args, timeout=240, saved="pt"):
    """Runs tests/python/<script> on `world` ranks (file:// rendezvous in
    `out`), fails the calling test on a timeout or a rank's failure, and
    returns load(case, ok=True): the ranks' results of `case`, each checked
    for an "error" unless ok is False. saved: "pt" (torch.save) or "pkl"."""
    import pytest
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, script), str(r), str(world),
                               str(out / "init"), str(out)] + [str(a) for a in args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=timeout)[0].decode(errors="replace"))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("%s ran past %d s" % (script, timeout))
    if any(p.returncode != 0 for p in procs):
        pytest.fail("%s failed:\n%s" % (script, "\n".join(logs)))

    def load(case, ok=True):
        read = torch_load if saved == "pt" else pickle_load
        results = [read(str(out / ("%s.rank%d.%s" % (case, r, saved)))) for r in range(world)]
        if ok:
            for r, res in enumerate(results):
                assert "error" not in res, "rank %d, %s:\n%s" % (r, case, res["error"])
        return results
    return load


def run_cases(cases, argv):
    """The script side: joins the job argv names (RANK WORLD INIT_FILE
    OUT_DIR) on Gloo, runs cases (name -> fn(rank) returning a dict) in
    order, and saves each result, or its traceback, for the test."""
    import torch
    import torch.distributed as dist
    rank, world, init_file, out_dir = int(argv[1]), int(argv[2]), argv[3], argv[4]
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    torch.set_num_threads(1)
    for name, run in cases.items():
        try:
            result = run(rank)
        except Exception:
            result = {"error": traceback.format_exc()}
        dist.barrier()
        torch.save(result, os.path.join(out_dir, "%s.rank%d.pt" % (name, rank)))
    dist.destroy_process_group()


def run_cases_without_torch(cases, argv):
    """run_cases for scripts without PyTorch (JAX, NumPy): no process group
    (each case opens its own ddph session, which is collective); results
    saved with pickle."""
    rank, out_dir = int(argv[1]), argv[4]
    for name, run in cases.items():
        try:
            result = run(rank)
        except Exception:
            result = {"error": traceback.format_exc()}
        with open(os.path.join(out_dir, "%s.rank%d.pkl" % (name, rank)), "wb") as f:
            pickle.dump(result, f)
