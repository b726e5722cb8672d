"""ddphooks.checkpoint.consolidate on zero shards: it joins them only when
they are every rank's shard of one run (docs/zero.md, "Checkpoints"). The
shards are written field by field as docs/zero.md lays them out, so no
torch and no ranks are needed."""
import struct

import pytest

import ddphooks
import ddphooks.checkpoint as checkpoint


def shard(world, rank, run, version=3):
    """A zero shard of no pieces (version 3 carries the run id)."""
    body = struct.pack("<IIIQ", 1, world, rank, 0x1234)
    if version >= 3:
        body += struct.pack("<Q", run)
    body += struct.pack("<I", 0) + (struct.pack("<I", 0) if version >= 2 else b"")
    head = b"DDPHZERO" + struct.pack("<I", version)
    length = len(head) + 8 + len(body) + 8
    data = head + struct.pack("<Q", length) + body
    return data + struct.pack("<Q", checkpoint._fnv1a64(data))


def state(blob):
    return checkpoint.container([("zero", "zero_step", blob)])


def joined(states):
    return checkpoint.parse(checkpoint.consolidate(states))[0][2]


def test_every_ranks_shard_of_one_run_joins():
    a0, a1 = shard(2, 0, 7), shard(2, 1, 7)
    assert joined([state(a1), state(a0)]) == a1 + a0


def test_one_ranks_shard_alone_is_refused():
    with pytest.raises(ddphooks.DDPHError, match="a world of 2, but rank 1 is missing"):
        checkpoint.consolidate([state(shard(2, 0, 7))])
    # A world of one is whole on its own.
    assert joined([state(shard(1, 0, 7))]) == shard(1, 0, 7)


def test_shards_of_different_runs_are_refused():
    with pytest.raises(ddphooks.DDPHError,
                       match="different runs: rank 0's is of run 0000000000000007, rank 1's of "
                             "run 0000000000000008"):
        checkpoint.consolidate([state(shard(2, 0, 7)), state(shard(2, 1, 8))])


def test_a_rank_twice_or_other_worlds_are_refused():
    with pytest.raises(ddphooks.DDPHError, match="rank 0's zero shard is there twice"):
        checkpoint.consolidate([state(shard(2, 0, 7)), state(shard(2, 0, 7))])
    with pytest.raises(ddphooks.DDPHError, match="worlds of 2 and 3 ranks"):
        checkpoint.consolidate([state(shard(2, 0, 7)), state(shard(3, 1, 7))])


def test_version_two_shards_without_a_run_id_still_join():
    a0, a1 = shard(2, 0, 0, version=2), shard(2, 1, 0, version=2)
    assert joined([state(a0), state(a1)]) == a0 + a1
