"""Latency and bandwidth between two hosts of a virtual cluster, over plain TCP.

:func:`measure` starts an echo server on one host and a client on the other: the client
times ``pings`` one-byte round trips (latency: half the median round trip) and sends
``megabytes`` in 1 MiB writes that the server acknowledges at the end (bandwidth: bytes over
the time to the acknowledgement). This is what ``gnnscale tune --network BANDWIDTH,LATENCY``
takes for a cluster's links.

``python -m gnnscale.testing.link_probe server PORT`` / ``client ADDRESS PORT PINGS MEGABYTES``
are the two ends; the client prints one JSON line.

:func:`messages` times single messages sent after the link idled (``messages`` /
``send-messages`` ends), as a training step's halo exchanges are sent between its computing:
what a shaped link's token bucket passes faster than its rate.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time

CHUNK = 1 << 20


def _recv_exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        part = sock.recv(count - len(data))
        if not part:
            raise ConnectionError("peer closed the connection")
        data += part
    return bytes(data)


def _discard(sock: socket.socket, count: int, early: str) -> None:
    """Read ``count`` bytes and drop them; ``early`` says what a peer closing first cut short."""
    received = 0
    while received < count:
        part = sock.recv(min(CHUNK, count - received))
        if not part:
            raise ConnectionError(early)
        received += len(part)


@contextlib.contextmanager
def _one_client(port: int):
    """Listen on ``port``, say "listening" (the driver waits for it), and yield the first
    client's connection, Nagle's algorithm off."""
    with socket.create_server(("0.0.0.0", port)) as server:
        print("listening", flush=True)
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            yield conn


def _connect(address: str, port: int) -> socket.socket:
    """A connection to the server at ``address:port``, retried for 10 s while it starts, Nagle's
    algorithm off."""
    deadline = time.monotonic() + 10
    while True:
        try:
            sock = socket.create_connection((address, port), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _between_hosts(cluster, sender: str, receiver: str, server_end: str, client_end: str,
                   port: int, args: list, what: str):
    """Run this module's ``server_end`` on ``receiver`` and its ``client_end`` (with the
    receiver's address, ``port`` and ``args``) on ``sender``; the client's JSON line."""
    server = cluster.popen(receiver, [sys.executable, "-m", "gnnscale.testing.link_probe",
                                      server_end, str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()  # "listening"
        done = cluster.run(sender, [sys.executable, "-m", "gnnscale.testing.link_probe",
                                    client_end, cluster.host(receiver).address, str(port),
                                    *map(str, args)], timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{what} failed: {done.stderr.strip()}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.kill()
        server.communicate()


def serve(port: int) -> None:
    """Answer one client: echo its pings, then count its bulk bytes and acknowledge them."""
    with _one_client(port) as conn:
        pings = int.from_bytes(_recv_exact(conn, 4), "big")
        for _ in range(pings):
            conn.sendall(_recv_exact(conn, 1))
        total = int.from_bytes(_recv_exact(conn, 8), "big")
        _discard(conn, total, "client closed before sending everything")
        conn.sendall(b"k")


def client(address: str, port: int, pings: int, megabytes: float) -> dict:
    """Round trips and bulk transfer against :func:`serve`; latency in s, bandwidth in bytes/s."""
    with _connect(address, port) as sock:
        sock.sendall(pings.to_bytes(4, "big"))
        trips = []
        for _ in range(pings):
            start = time.perf_counter()
            sock.sendall(b"p")
            _recv_exact(sock, 1)
            trips.append(time.perf_counter() - start)
        total = int(megabytes * CHUNK)
        payload = bytes(CHUNK)
        start = time.perf_counter()
        sock.sendall(total.to_bytes(8, "big"))
        sent = 0
        while sent < total:
            view = memoryview(payload)[: min(CHUNK, total - sent)]
            sock.sendall(view)
            sent += len(view)
        _recv_exact(sock, 1)
        seconds = time.perf_counter() - start
    return {"latency_s": statistics.median(trips) / 2, "bandwidth_Bps": total / seconds,
            "round_trips": len(trips), "bytes": total, "seconds": seconds}


def measure(cluster, sender: str = "node0", receiver: str = "node1", pings: int = 200,
            megabytes: float = 64, port: int = 47123) -> dict:
    """Latency and bandwidth from ``sender`` to ``receiver`` in ``cluster`` (a VirtualCluster)."""
    return _between_hosts(cluster, sender, receiver, "server", "client", port,
                          [pings, megabytes], "link probe")


def serve_messages(port: int) -> None:
    """Answer one client of :func:`send_messages`: acknowledge each whole message."""
    with _one_client(port) as conn:
        while True:
            header = conn.recv(8, socket.MSG_WAITALL)
            if len(header) < 8:
                return
            _discard(conn, int.from_bytes(header, "big"), "client closed inside a message")
            conn.sendall(b"k")


def send_messages(address: str, port: int, sizes: list[int], gap_s: float,
                  repeats: int = 7) -> dict:
    """Seconds (median of ``repeats``) from sending a message of each of ``sizes`` bytes, after
    ``gap_s`` of idle link, to its acknowledgement; size 1 gives the round trip."""
    out = {}
    with _connect(address, port) as sock:
        for size in [1, *sizes]:
            times = []
            for _ in range(repeats):
                time.sleep(gap_s)
                start = time.perf_counter()
                sock.sendall(size.to_bytes(8, "big") + bytes(size))
                _recv_exact(sock, 1)
                times.append(time.perf_counter() - start)
            out[size] = statistics.median(times)
    return out


def messages(cluster, sizes: list[int], sender: str = "node0", receiver: str = "node1",
             gap_s: float = 0.03, port: int = 47124) -> dict:
    """``{size: bytes per second}`` of single messages from ``sender`` to ``receiver`` sent
    after ``gap_s`` idle (the round trip of a 1-byte message taken off each time); None where
    a message took less than 1.25 round trips, its own time lost in the round trip's."""
    seconds = {int(k): v for k, v in _between_hosts(
        cluster, sender, receiver, "messages", "send-messages", port, [gap_s, *sizes],
        "message probe").items()}
    trip = seconds.pop(1)
    return {size: size / (s - trip) if s - trip > trip / 4 else None
            for size, s in seconds.items()}


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]))
    elif sys.argv[1] == "messages":
        serve_messages(int(sys.argv[2]))
    elif sys.argv[1] == "send-messages":
        print(json.dumps(send_messages(sys.argv[2], int(sys.argv[3]), [int(v) for v in
                                                                       sys.argv[5:]],
                                       float(sys.argv[4]))))
    else:
        print(json.dumps(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                float(sys.argv[5]))))
