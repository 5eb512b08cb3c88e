"""The YouTube fake's control routes (/_fake/...), for a harness in another process."""

from __future__ import annotations

import json

from fakes.youtube.plumbing import Plumbing


class Control(Plumbing):
    """/_fake/*: what a harness in another process sets up and reads."""

    def control_faults(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        try:
            self.fake.faults.push(spec.pop("fault"), **spec)
        except (KeyError, ValueError) as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {"pending": self.fake.faults.pending()})

    def control_channel(self, _query: dict[str, str]) -> None:
        spec = json.loads(self._body() or b"{}")
        self._send(200, {"id": self.fake.add_channel(spec["handle"], spec["refresh_token"])})

    def control_state(self, _query: dict[str, str]) -> None:
        self._send(200, self.fake.snapshot())
