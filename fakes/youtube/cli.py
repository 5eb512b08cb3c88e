"""`python -m fakes.youtube`: the fake standalone, with channels made from the command line."""

from __future__ import annotations

import fakes.youtube
from fakes.platform_common import standalone_parser
from fakes.youtube.server import FakeYouTube


def main(argv: list[str] | None = None) -> None:
    parser = standalone_parser(
        "youtube", fakes.youtube.__doc__, "--channel", "HANDLE=REFRESH_TOKEN", "a channel to create"
    )
    args = parser.parse_args(argv)
    fake = FakeYouTube(args.state_dir, args.port)
    for handle, token in args.accounts:
        fake.add_channel(handle, token)
    fake.serve_until_interrupted("fake YouTube on {base_url} (token endpoint {base_url}token)")
