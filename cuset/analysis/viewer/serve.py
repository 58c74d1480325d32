"""Serve a built viewer on 127.0.0.1 only (the loopback interface: nothing else can reach it)."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "127.0.0.1"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


def make_server(directory: str | Path, port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server of `directory` bound to 127.0.0.1:`port` (0: a free port); the caller
    runs `serve_forever()` and `server_close()`."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    return ThreadingHTTPServer((HOST, port), handler)
