"""`python -m fakes.instagram`: the fake standalone, with accounts made from the command line."""

from __future__ import annotations

import fakes.instagram
from fakes.instagram.server import FakeInstagram
from fakes.platform_common import standalone_parser


def main(argv: list[str] | None = None) -> None:
    parser = standalone_parser(
        "instagram",
        fakes.instagram.__doc__,
        "--account",
        "USERNAME=ACCESS_TOKEN",
        "an account to create",
    )
    parser.add_argument("--processing-delay", type=float, default=None)
    args = parser.parse_args(argv)
    fake = FakeInstagram(args.state_dir, args.port)
    for username, token in args.accounts:
        print(f"account {username}: {fake.add_account(username, token)}", flush=True)
    if args.processing_delay is not None:
        fake.set_processing_delay(args.processing_delay)
    fake.serve_until_interrupted("fake Instagram on {base_url} (graph and rupload)")
