"""`python -m fakes.instagram`: the fake standalone, with accounts made from the command line."""

from __future__ import annotations

import argparse

import fakes.instagram
from fakes.instagram.server import FakeInstagram


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(fakes.instagram.__doc__ or "").split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=".mdame/fake-instagram")
    parser.add_argument(
        "--account",
        action="append",
        default=[],
        help="USERNAME=ACCESS_TOKEN: an account to create (repeatable)",
    )
    parser.add_argument("--processing-delay", type=float, default=None)
    args = parser.parse_args(argv)
    fake = FakeInstagram(args.state_dir, args.port)
    for spec in args.account:
        username, _, token = spec.partition("=")
        print(f"account {username}: {fake.add_account(username, token)}", flush=True)
    if args.processing_delay is not None:
        fake.set_processing_delay(args.processing_delay)
    fake.serve_until_interrupted("fake Instagram on {base_url} (graph and rupload)")
