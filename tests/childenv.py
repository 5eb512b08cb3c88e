"""The environment of a process a test starts: this one's, less the deployment settings the test
sets itself (MDAME_*, and any other prefixes named), but keeping the media profile the suite
runs with (tests/conftest.py), so that a child makes media of the size the test expects."""

from __future__ import annotations

import os

KEPT = ("MDAME_MEDIA_PROFILE",)


def child_environ(*prefixes: str) -> dict[str, str]:
    dropped = ("MDAME_", *prefixes)
    return {k: v for k, v in os.environ.items() if k in KEPT or not k.startswith(dropped)}
