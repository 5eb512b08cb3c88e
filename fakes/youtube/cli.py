"""`python -m fakes.youtube`: the fake standalone, with channels made from the command line."""

from __future__ import annotations

import argparse

import fakes.youtube
from fakes.youtube.server import FakeYouTube


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=fakes.youtube.__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=".mdame/fake-youtube")
    parser.add_argument(
        "--channel",
        action="append",
        default=[],
        help="HANDLE=REFRESH_TOKEN: a channel to create (repeatable)",
    )
    args = parser.parse_args(argv)
    fake = FakeYouTube(args.state_dir, args.port)
    for spec in args.channel:
        handle, _, token = spec.partition("=")
        fake.add_channel(handle, token)
    fake.serve_until_interrupted("fake YouTube on {base_url} (token endpoint {base_url}token)")
