"""The TikTok fake's control routes (/_fake/...), for a harness in another process."""

from __future__ import annotations

import json

from fakes.platform_common import push_fault
from fakes.tiktok.plumbing import Plumbing


class Control(Plumbing):
    """/_fake/*: what a harness in another process sets up and reads."""

    def control_faults(self, _query: dict[str, str]) -> None:
        self._send(*push_fault(self.fake.faults, self._body()))

    def control_creator(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        try:
            open_id = self.fake.add_creator(**spec)
        except TypeError as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {"open_id": open_id})

    def control_limits(self, _query: dict[str, str]) -> None:
        try:
            self.fake.set_limits(**json.loads(self._body() or b"{}"))
        except ValueError as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {"limits": self.fake.state.data["limits"]})

    def control_revoke(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        self.fake.revoke(spec["open_id"])
        self._send(200, {"revoked": spec["open_id"]})

    def control_state(self, _query: dict[str, str]) -> None:
        self._send(200, self.fake.snapshot())
