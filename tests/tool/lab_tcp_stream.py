"""One raw TCP stream between the two ranks of `ddph lab`: rank 1 sends for
2 s to rank 0, which prints the sender's address and the rate it received
("from 127.0.0.2: 0.957 Gbit/s"). Run as `ddph lab --link R -- python3 THIS`."""
import os
import socket
import time

rank = int(os.environ["RANK"])
master = os.environ["MASTER_ADDR"]
port = int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((master, port))
    server.listen(1)
    conn, peer = server.accept()
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
    for _ in range(100):  # rank 0 may not listen yet
        try:
            conn = socket.create_connection((master, port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    chunk = b"x" * (1 << 20)
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        conn.sendall(chunk)
    conn.close()
