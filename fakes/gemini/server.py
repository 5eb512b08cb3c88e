"""The fake Gemini's HTTP server, and `running` for a test's block."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

from fakes.gemini.handler import Handler
from fakes.gemini.state import FakeGemini


class Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGemini


def serve(host: str, port: int, fake: FakeGemini) -> Server:
    server = Server((host, port), Handler)
    server.fake = fake
    fake.base_url = f"http://{host}:{server.server_address[1]}"
    return server


@contextlib.contextmanager
def running(
    tts_format: str = "pcm", host: str = "127.0.0.1", port: int = 0
) -> Iterator[FakeGemini]:
    """The server on an ephemeral port for the block; yields its state (`.base_url`,
    `.faults.push(kind)`, `.set_score(x)`, `.set_field(name, value)`, `.requests`)."""
    if tts_format not in ("pcm", "wav"):
        raise ValueError("tts_format must be 'pcm' or 'wav'")
    fake = FakeGemini(tts_format=tts_format)
    server = serve(host, port, fake)
    thread = threading.Thread(target=server.serve_forever, name="fake-gemini", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
