"""What the lab's TCP test scripts share: one stream between rank 1 and
rank 0 of `ddph lab`, at the MASTER_ADDR and MASTER_PORT the lab sets."""
import os
import socket
import time


def rank():
    return int(os.environ["RANK"])


def accept():
    """Rank 0: the one connection rank 1 makes, and the sender's address."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
    server.listen(1)
    return server.accept()


def connect(tries=200):
    """Rank 1: a connection to rank 0, which may not listen yet."""
    address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    for _ in range(tries - 1):
        try:
            return socket.create_connection(address)
        except ConnectionRefusedError:
            time.sleep(0.05)
    return socket.create_connection(address)
