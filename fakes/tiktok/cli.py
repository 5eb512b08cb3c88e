"""`python -m fakes.tiktok`: the fake standalone, with creators made from the command line."""

from __future__ import annotations

import argparse

import fakes.tiktok
from fakes.tiktok.server import FakeTikTok


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=fakes.tiktok.__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=".mdame/fake-tiktok")
    parser.add_argument(
        "--creator",
        action="append",
        default=[],
        help="USERNAME=REFRESH_TOKEN: a creator to add, for an unaudited app (repeatable)",
    )
    parser.add_argument("--audited", action="store_true", help="the creators see an audited app")
    args = parser.parse_args(argv)
    fake = FakeTikTok(args.state_dir, args.port)
    for spec in args.creator:
        username, _, token = spec.partition("=")
        fake.add_creator(username, token, audited=args.audited)
    fake.serve_until_interrupted("fake TikTok on {base_url}")
