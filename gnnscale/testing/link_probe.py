"""Latency and bandwidth between two hosts of a virtual cluster, over plain TCP.

:func:`measure` starts an echo server on one host and a client on the other: the client
times ``pings`` one-byte round trips (latency: half the median round trip) and sends
``megabytes`` in 1 MiB writes that the server acknowledges at the end (bandwidth: bytes over
the time to the acknowledgement). This is what ``gnnscale tune --network BANDWIDTH,LATENCY``
takes for a cluster's links.

``python -m gnnscale.testing.link_probe server PORT`` / ``client ADDRESS PORT PINGS MEGABYTES``
are the two ends; the client prints one JSON line.
"""

from __future__ import annotations

import json
import socket
import statistics
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


def serve(port: int) -> None:
    """Answer one client: echo its pings, then count its bulk bytes and acknowledge them."""
    with socket.create_server(("0.0.0.0", port)) as server:
        print("listening", flush=True)
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pings = int.from_bytes(_recv_exact(conn, 4), "big")
            for _ in range(pings):
                conn.sendall(_recv_exact(conn, 1))
            total = int.from_bytes(_recv_exact(conn, 8), "big")
            received = 0
            while received < total:
                part = conn.recv(min(CHUNK, total - received))
                if not part:
                    raise ConnectionError("client closed before sending everything")
                received += len(part)
            conn.sendall(b"k")


def client(address: str, port: int, pings: int, megabytes: float) -> dict:
    """Round trips and bulk transfer against :func:`serve`; latency in s, bandwidth in bytes/s."""
    deadline = time.monotonic() + 10
    while True:
        try:
            sock = socket.create_connection((address, port), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
    import subprocess

    server = cluster.popen(receiver, [sys.executable, "-m", "gnnscale.testing.link_probe",
                                      "server", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()  # "listening"
        done = cluster.run(sender, [sys.executable, "-m", "gnnscale.testing.link_probe", "client",
                                    cluster.host(receiver).address, str(port), str(pings),
                                    str(megabytes)], timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"link probe failed: {done.stderr.strip()}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.kill()
        server.communicate()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]))
    else:
        print(json.dumps(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                float(sys.argv[5]))))
