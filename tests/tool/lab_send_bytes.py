"""Rank 1 of `ddph lab` sends exactly BYTES to rank 0 over one TCP stream;
rank 0 reads them all, says how many it got ("received N bytes"), then
sleeps SECONDS, so that its wall time is at least that. Run as
`ddph lab --link R -- python3 THIS BYTES SECONDS`."""
import os
import socket
import sys
import time

total, pause = int(sys.argv[1]), float(sys.argv[2])
rank = int(os.environ["RANK"])
master = os.environ["MASTER_ADDR"]
port = int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((master, port))
    server.listen(1)
    conn, _ = server.accept()
    received = 0
    while True:
        data = conn.recv(1 << 20)
        if not data:
            break
        received += len(data)
    print(f"received {received} bytes", flush=True)
    time.sleep(pause)
else:
    for _ in range(200):  # rank 0 may not listen yet
        try:
            conn = socket.create_connection((master, port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    conn.sendall(b"x" * total)
    conn.close()
