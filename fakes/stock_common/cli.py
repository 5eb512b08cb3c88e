"""`python -m fakes.pexels|pixabay`: one stock server standalone, until Ctrl-C."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from fakes.stock_common.server import StockServer


def stock_main(
    server: Callable[[str | None, int, str], StockServer],
    name: str,
    limit: int,
    window_s: float,
    description: str,
    argv: list[str] | None = None,
) -> None:
    """`python -m fakes.pexels|pixabay`: one stock server until Ctrl-C, with its key and
    rate-limit window on the command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=None, help="its counters (default: a temp folder)")
    parser.add_argument("--key", action="append", help="accept only this key (repeatable)")
    parser.add_argument("--rate-limit", type=int, help=f"API requests a window (default {limit})")
    parser.add_argument("--rate-window", type=float, help=f"the window, seconds ({window_s:g})")
    args = parser.parse_args(argv)
    fake = server(args.state_dir, args.port, args.host)
    if args.key:
        fake.keys = set(args.key)
    if args.rate_limit is not None:
        fake.set_limits(rate_limit=args.rate_limit)
    if args.rate_window is not None:
        fake.set_limits(rate_window=args.rate_window)
    fake.serve_until_interrupted(f"fake {name} on {{base_url}}")
