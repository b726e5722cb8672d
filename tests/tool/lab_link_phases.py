"""One TCP stream between the two ranks of `ddph lab` on a link whose rate
changes: rank 1 sends to rank 0 until END seconds on the lab's clock
(DDPH_LAB_START_MONOTONIC, the schedule's 0s); rank 0 prints, for each
window FROM-TO (seconds on that clock), the rate it received in it
("window 0.3-1.4 s: 381.20 Mbit/s"), from the first to the last read that
falls inside. Run as `ddph lab --link SCHEDULE -- python3 THIS END FROM-TO...`."""
import os
import sys
import time

import lab_stream

start = float(os.environ["DDPH_LAB_START_MONOTONIC"])
end = float(sys.argv[1])
windows = [tuple(float(x) for x in w.split("-")) for w in sys.argv[2:]]


def now():
    return time.monotonic() - start


if lab_stream.rank() == 0:
    conn, _ = lab_stream.accept()
    # Per window: the first and last read inside it, and the bytes of the
    # reads after the first (those of the first arrived before it).
    first = [None] * len(windows)
    last = [None] * len(windows)
    received = [0] * len(windows)
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        t = now()
        for i, (a, b) in enumerate(windows):
            if a <= t <= b:
                if first[i] is None:
                    first[i] = t
                else:
                    received[i] += len(data)
                last[i] = t
    for i, (a, b) in enumerate(windows):
        if first[i] is None or last[i] <= first[i]:
            print(f"window {a:g}-{b:g} s: nothing received")
            continue
        mbit = received[i] * 8 / (last[i] - first[i]) / 1e6
        print(f"window {a:g}-{b:g} s: {mbit:.2f} Mbit/s")
else:
    conn = lab_stream.connect()
    chunk = b"x" * (1 << 16)
    while now() < end:
        conn.sendall(chunk)
    conn.close()
