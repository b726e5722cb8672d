"""Rank 1 of `ddph lab` sends exactly BYTES to rank 0 over one TCP stream;
rank 0 reads them all, says how many it got ("received N bytes"), then
sleeps SECONDS, so that its wall time is at least that. Run as
`ddph lab --link R -- python3 THIS BYTES SECONDS`."""
import sys
import time

import lab_stream

total, pause = int(sys.argv[1]), float(sys.argv[2])
if lab_stream.rank() == 0:
    conn, _ = lab_stream.accept()
    received = 0
    while True:
        data = conn.recv(1 << 20)
        if not data:
            break
        received += len(data)
    print(f"received {received} bytes", flush=True)
    time.sleep(pause)
else:
    conn = lab_stream.connect()
    conn.sendall(b"x" * total)
    conn.close()
