"""The zero hooks' checkpoints through ddphooks.torch: AdamW sharded over 2
ranks for 5 steps, each rank's state_dict() saved, the states consolidated
(DDPHook.consolidate) and loaded on 3 ranks for 5 more steps, against
torch.optim.AdamW doing the same with its own (unsharded) state_dict."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import ddphooks.checkpoint  # noqa: E402
import ddphooks.torch  # noqa: E402


def ranks(world, out, phase):
    init = out / ("init_%s" % phase)
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "zero_resume_rank.py"), str(r),
                               str(world), str(init), str(out), phase],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    logs = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero")
    ranks(2, out, "first")
    states = [torch.load(str(out / ("first.rank%d.pt" % r)))["ddph"] for r in range(2)]
    torch.save(ddphooks.torch.DDPHook.consolidate(states), str(out / "joined.pt"))
    ranks(3, out, "resume")
    ranks(3, out, "fresh")
    return out


def test_consolidated_shards_resume_on_three_ranks_as_torch_optim(out):
    for r in range(3):
        res = torch.load(str(out / ("resume.rank%d.pt" % r)))
        torch.testing.assert_close(res["ddph"], res["ref"], rtol=0, atol=1e-6)


def test_without_the_state_the_resumed_run_differs(out):
    resumed = torch.load(str(out / "resume.rank0.pt"))["ddph"]
    fresh = torch.load(str(out / "fresh.rank0.pt"))
    assert (fresh["ddph"] - resumed).abs().max() > 1e-4
    torch.testing.assert_close(fresh["ddph"], fresh["ref"], rtol=0, atol=1e-6)


def test_each_shard_is_its_ranks_and_the_join_holds_both(out):
    states = [torch.load(str(out / ("first.rank%d.pt" % r)))["ddph"]["state"] for r in range(2)]
    shards = [ddphooks.checkpoint.parse(s) for s in states]
    assert [len(s) for s in shards] == [1, 1]
    blobs = [s[0][2] for s in shards]
    assert all(b[:8] == b"DDPHZERO" for b in blobs) and blobs[0] != blobs[1]
    joined = ddphooks.checkpoint.parse(torch.load(str(out / "joined.pt"))["state"])
    assert joined == [("zero", "zero_step_interleaved", blobs[0] + blobs[1])]


def test_consolidate_refuses_states_it_cannot_join(out):
    state = torch.load(str(out / "first.rank0.pt"))["ddph"]
    bad = bytearray(state["state"])
    bad[30] ^= 1
    with pytest.raises(ddphooks.DDPHError, match="checksum mismatch"):
        ddphooks.checkpoint.consolidate([bytes(bad)])
    other = ddphooks.checkpoint.container([("quantization", "per_channel", b"rank0"),])
    other1 = ddphooks.checkpoint.container([("quantization", "per_channel", b"rank1"),])
    with pytest.raises(ddphooks.DDPHError, match="differs between ranks and is not a zero shard"):
        ddphooks.checkpoint.consolidate([other, other1])
    with pytest.raises(ddphooks.DDPHError, match="steps"):
        ddphooks.torch.DDPHook.consolidate([state, dict(state, step=state["step"] + 1)])
