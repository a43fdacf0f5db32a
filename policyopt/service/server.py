"""Run the service in a background thread on a loopback port (tests, docs examples, benchmarks).

::

    with ServiceThread(create_app("state.sqlite")) as url:
        httpx.get(f"{url}/v1/health")

The socket is bound before the server starts (port 0 = a free port chosen by the OS), so the URL
is known at once; leaving the ``with`` block stops the server and waits for its thread.
"""
from __future__ import annotations

import socket
import threading
import time
from typing import Any

__all__ = ["ServiceThread", "main"]


class ServiceThread:
    """A uvicorn server for ``app`` on ``host:port`` in a daemon thread (context manager → base URL)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 start_timeout: float = 20.0) -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()[:2]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.start_timeout = start_timeout

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start on {self.url}")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m policyopt.service.server --state FILE [--port 0]``: serve on loopback, print
    ``READY <url>`` on stdout once listening, stop when stdin closes (benchmarks drive it so)."""
    import argparse
    import sys

    from .app import create_app

    p = argparse.ArgumentParser(prog="python -m policyopt.service.server")
    p.add_argument("--state", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--api-key", default=None)
    args = p.parse_args(argv)
    srv = ServiceThread(create_app(args.state, api_key=args.api_key), port=args.port)
    print(f"READY {srv.start()}", flush=True)
    try:
        sys.stdin.read()  # returns when the parent closes our stdin (or exits)
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
