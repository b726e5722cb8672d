"""Joining the checkpoints of the ranks of one job into one.

Most hooks keep the same state on every rank, or state that belongs to its
rank alone. The zero hooks keep a shard: each rank saves the optimizer
state of its own share of the parameters. ``consolidate(states)`` turns the
saved states of every rank of a job (``Session.state_dict()`` bytes, in any
order) into one that loads on any rank of a job of any size, as
``ZeroRedundancyOptimizer.consolidate_state_dict`` does for PyTorch:
records equal on every rank are kept once, zero shards are joined (the
zero hooks reshard the joined state when they load it), and any other
record that differs between ranks is an error naming it. Zero shards join
only when they are every rank's of one run: each rank once, all of the same
world size, and (from shard version 3) all of the same run id.

The container is the one of ``ddph_session_save_state`` (docs/zero.md,
"Checkpoints"): "DDPHSTAT", u32 version 2, u32 record count, per record
u32 + family, u32 + hook name, u64 + the hook's blob, then the u64 FNV-1a of
every byte before it.
"""
import struct

from . import errors

_MAGIC = b"DDPHSTAT"
_VERSION = 2
_ZERO_SHARD = b"DDPHZERO"
# The frames' FNV-1a 64: this offset basis (one digit short of the FNV
# standard's), the standard prime.
_FNV_BASIS = 1469598103934665603
_FNV_PRIME = 1099511628211


def _fnv1a64(data):
    h = _FNV_BASIS
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def _bad(message):
    return errors.DDPHError(errors.Code.INVALID_ARGUMENT, "ddphooks.checkpoint: " + message)


def parse(state):
    """The records of a saved session state: [(family, hook, blob)]."""
    data = bytes(state)
    if len(data) < 24 or data[:8] != _MAGIC:
        raise _bad("not a saved session state (no DDPHSTAT header)")
    version, count = struct.unpack_from("<II", data, 8)
    if version != _VERSION:
        raise _bad("session state version %d; this reads version %d" % (version, _VERSION))
    if struct.unpack_from("<Q", data, len(data) - 8)[0] != _fnv1a64(data[:-8]):
        raise _bad("checksum mismatch: the saved state is corrupt")
    at, end, records = 16, len(data) - 8, []
    try:
        for _ in range(count):
            fields = []
            for width in ("<I", "<I", "<Q"):
                (n,) = struct.unpack_from(width, data, at)
                at += struct.calcsize(width)
                if at + n > end:
                    raise _bad("truncated record")
                fields.append(data[at:at + n])
                at += n
            records.append((fields[0].decode(), fields[1].decode(), fields[2]))
    except struct.error:
        raise _bad("truncated record") from None
    if at != end:
        raise _bad("%d bytes after the last record" % (end - at))
    return records


def container(records):
    """The session state holding `records` ([(family, hook, blob)])."""
    out = bytearray(_MAGIC + struct.pack("<II", _VERSION, len(records)))
    for family, hook, blob in records:
        for field, width in ((family.encode(), "<I"), (hook.encode(), "<I"), (blob, "<Q")):
            out += struct.pack(width, len(field)) + field
    out += struct.pack("<Q", _fnv1a64(out))
    return bytes(out)


def _shard_headers(blob, record):
    """(world, rank, run id) of each zero shard in `blob` (shards back to
    back: docs/zero.md, "One shard"); run id 0 for versions 1 and 2, which
    carry none."""
    out, at = [], 0
    while at < len(blob):
        if len(blob) - at < 40 or blob[at:at + 8] != _ZERO_SHARD:
            raise _bad("record %s: byte %d does not start a zero shard" % (record, at))
        version, length = struct.unpack_from("<IQ", blob, at + 8)
        world, rank = struct.unpack_from("<II", blob, at + 24)
        run = struct.unpack_from("<Q", blob, at + 40)[0] if version >= 3 else 0
        if length < 48 or at + length > len(blob):
            raise _bad("record %s: a zero shard of %d bytes runs past the %d left" %
                       (record, length, len(blob) - at))
        out.append((world, rank, run))
        at += length
    return out


def _join_shards(blobs, record):
    """The ranks' zero shards joined, once they are checked to be every
    rank's of one run."""
    shards = [h for b in blobs for h in _shard_headers(b, record)]
    worlds = sorted({w for w, _, _ in shards})
    if len(worlds) != 1:
        raise _bad("record %s: the zero shards come from worlds of %s ranks; join the shards of "
                   "one run" % (record, " and ".join(map(str, worlds))))
    world = worlds[0]
    ranks = [r for _, r, _ in shards]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        raise _bad("record %s: rank %d's zero shard is there twice" % (record, twice[0]))
    missing = sorted(set(range(world)) - set(ranks))
    if missing:
        raise _bad("record %s: the zero shards are of a world of %d, but rank%s %s %s missing; "
                   "a shard holds only its rank's share of the optimizer state, so join every "
                   "rank's" % (record, world, "s" if len(missing) > 1 else "",
                               ", ".join(map(str, missing)), "are" if len(missing) > 1 else "is"))
    runs = {}
    for _, rank, run in shards:
        if run != 0:
            runs.setdefault(run, rank)
    if len(runs) > 1:
        (a, ra), (b, rb) = sorted(runs.items(), key=lambda kv: kv[1])[:2]
        raise _bad("record %s: the zero shards come from different runs: rank %d's is of run "
                   "%016x, rank %d's of run %016x; join the shards that the ranks of one run "
                   "saved at one step" % (record, ra, a, rb, b))
    return b"".join(blobs)


def consolidate(states):
    """One session state from the saved states of every rank of a job."""
    parsed = [parse(s) for s in states]
    if not parsed:
        raise _bad("no states to consolidate")
    out = []
    for i, first in enumerate(parsed[0]):
        column = [p[i] if i < len(p) else None for p in parsed]
        if any(r is None or r[:2] != first[:2] for r in column):
            raise _bad("the ranks' states hold different hooks (record %d: %s/%s); they are "
                       "not from one job" % (i, first[0], first[1]))
        blobs = [r[2] for r in column]
        if all(b[:8] == _ZERO_SHARD for b in blobs):
            name = "%d (%s/%s)" % (i, first[0], first[1])
            out.append((first[0], first[1], _join_shards(blobs, name)))
        elif all(b == blobs[0] for b in blobs):
            out.append(first)
        else:
            raise _bad("record %d (%s/%s) differs between ranks and is not a zero shard: its "
                       "hook keeps per-rank state, which one rank's checkpoint cannot hold for "
                       "another" % (i, first[0], first[1]))
    if any(len(p) != len(parsed[0]) for p in parsed):
        raise _bad("the ranks' states hold different numbers of hooks")
    return container(out)
