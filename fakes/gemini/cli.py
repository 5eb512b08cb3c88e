"""`python -m fakes.gemini`: the fake standalone, until Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import shutil

from fakes.gemini.server import serve
from fakes.gemini.state import FakeGemini


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fakes.gemini", description="A local Gemini generateContent server"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tts-format", choices=("pcm", "wav"), default="pcm")
    args = parser.parse_args(argv)
    if shutil.which("espeak-ng") is None:
        parser.error("espeak-ng is required for TTS answers")
    server = serve(args.host, args.port, FakeGemini(tts_format=args.tts_format))
    print(f"fake Gemini listening on {server.fake.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
