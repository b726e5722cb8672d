"""One raw TCP stream between the two ranks of `ddph lab`: rank 1 sends for
2 s to rank 0, which prints the sender's address and the rate it received
("from 127.0.0.2: 0.957 Gbit/s"). Run as `ddph lab --link R -- python3 THIS`."""
import time

import lab_stream

if lab_stream.rank() == 0:
    conn, peer = lab_stream.accept()
    received, start = 0, None
    while True:
        data = conn.recv(1 << 20)
        if not data:
            break
        if start is None:  # from the first byte: the connection's set-up is not the link
            start = time.monotonic()
        received += len(data)
    print(f"from {peer[0]}: {received * 8 / (time.monotonic() - start) / 1e9:.4f} Gbit/s")
else:
    conn = lab_stream.connect()
    chunk = b"x" * (1 << 20)
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        conn.sendall(chunk)
    conn.close()
