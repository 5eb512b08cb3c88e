"""`python -m fakes.tiktok`: the fake standalone, with creators made from the command line."""

from __future__ import annotations

import fakes.tiktok
from fakes.platform_common import standalone_parser
from fakes.tiktok.server import FakeTikTok


def main(argv: list[str] | None = None) -> None:
    parser = standalone_parser(
        "tiktok",
        fakes.tiktok.__doc__,
        "--creator",
        "USERNAME=REFRESH_TOKEN",
        "a creator to add, for an unaudited app",
    )
    parser.add_argument("--audited", action="store_true", help="the creators see an audited app")
    args = parser.parse_args(argv)
    fake = FakeTikTok(args.state_dir, args.port)
    for username, token in args.accounts:
        fake.add_creator(username, token, audited=args.audited)
    fake.serve_until_interrupted("fake TikTok on {base_url}")
