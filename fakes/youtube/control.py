"""The YouTube fake's control routes (/_fake/...), for a harness in another process."""

from __future__ import annotations

import json

from fakes.platform_common import push_fault
from fakes.youtube.plumbing import Plumbing


class Control(Plumbing):
    """/_fake/*: what a harness in another process sets up and reads."""

    def control_faults(self, _query: dict[str, str]) -> None:
        self._send(*push_fault(self.fake.faults, self._body()))

    def control_channel(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        self._send(200, {"id": self.fake.add_channel(spec["handle"], spec["refresh_token"])})

    def control_state(self, _query: dict[str, str]) -> None:
        self._send(200, self.fake.snapshot())
