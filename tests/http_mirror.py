"""A local HTTP mirror for download tests: 127.0.0.1 only, HTTP Range support, injectable faults.

``MirrorServer(folder)`` serves ``folder`` the way a publisher's server does (``Content-Length``,
``206 Partial Content`` for ``Range: bytes=N-``, ``416`` past the end). ``fail(path, ...)`` makes
the next request for ``path`` misbehave once: ``truncate`` (promise the whole length, send up to
byte ``at``, close the connection), ``stall`` (send up to ``at``, then go silent until the test
ends), ``ignore_range`` (answer a resume request with the whole file and status 200).
``mirror_of_shipped(folder)`` lays the repository's datasets/ out as the registry's sources.
"""

from __future__ import annotations

import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from mpi_launch import DATASETS_ROOT


class MirrorServer:
    """Serve ``folder`` on 127.0.0.1 (a free port) in a daemon thread; use as a context manager."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header) per request
        self.faults: dict[str, tuple[str, int]] = {}
        self.release = threading.Event()  # lets stalled handlers finish at stop()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fail(self, path: str, how: str, at: int = 0) -> None:
        """Make the next request for ``path`` (relative to the folder) fail as ``how``."""
        self.faults[path] = (how, at)

    def __enter__(self) -> "MirrorServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving (new connections are refused)."""
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


def _handler(mirror: MirrorServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            relative = self.path.lstrip("/")
            mirror.requests.append((relative, self.headers.get("Range")))
            file = mirror.folder / relative
            if ".." in Path(relative).parts or not file.is_file():
                self.send_error(404)
                return
            data = file.read_bytes()
            how, at = mirror.faults.pop(relative, (None, 0))
            start = 0
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
            if match and how != "ignore_range":
                start = int(match.group(1))
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            if how in ("truncate", "stall"):
                self.wfile.write(data[start:max(start, at)])
                self.wfile.flush()
                if how == "stall":
                    mirror.release.wait(60)
                self.close_connection = True
                return
            self.wfile.write(data[start:])

    return Handler


# The registry's source folders and file names for the shipped copies (URL path -> datasets/).
SHIPPED_FILES = {
    **{f"planetoid/ind.{name}.{part}": f"{folder}/raw/ind.{name}.{part}"
       for name, folder in (("cora", "Cora"), ("citeseer", "CiteSeer"))
       for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")},
    "heterophilous/tolokers.npz": "tolokers/raw/tolokers.npz",
    "heterophilous/minesweeper.npz": "minesweeper/raw/minesweeper.npz",
    "snap/email-Enron.txt.gz": "SNAP-email-enron/raw/email-enron.txt.gz",
    "snap/facebook_combined.txt.gz": "SNAP-facebook-combined/raw/facebook-combined.txt.gz",
}


def mirror_of_shipped(folder) -> Path:
    """Copy the shipped datasets into ``folder`` under the URL paths the registry asks for."""
    folder = Path(folder)
    for url_path, shipped in SHIPPED_FILES.items():
        target = folder / url_path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATASETS_ROOT / shipped, target)
    return folder
