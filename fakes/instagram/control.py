"""The Instagram fake's control routes (/_fake/...), for a harness in another process."""

from __future__ import annotations

import json
from typing import Any

from fakes.instagram.plumbing import Plumbing
from fakes.instagram.protocol import PUBLISH_WINDOW


class Control(Plumbing):
    """/_fake/*: what a harness in another process sets up and reads."""

    def _control(self, method: str, parts: list[str]) -> None:
        if method == "GET" and len(parts) == 2 and parts[0] == "media":
            self._media_file(parts[1])
            return
        body = self._body()
        try:
            spec = json.loads(body or b"{}")
        except ValueError:
            self._fail(400, {"error": "the body is not JSON"})
        fake = self.fake
        route = (method, "/".join(parts))
        try:
            if route == ("POST", "faults"):
                fake.faults.push(spec.pop("fault"), **spec)
                self._send(200, {"pending": fake.faults.pending()})
            elif route == ("POST", "accounts"):
                uid = fake.add_account(
                    spec["username"], spec["access_token"], spec.get("ig_user_id")
                )
                self._send(200, {"id": uid})
            elif route == ("POST", "revoke"):
                fake.revoke(spec.get("access_token"), spec.get("ig_user_id"))
                self._send(200, {"ok": True})
            elif route == ("POST", "settings"):
                self._settings(spec)
                self._send(200, fake.snapshot()["settings"])
            elif route == ("POST", "insights"):
                media_id = spec.pop("media_id")
                fake.set_insights(media_id, **spec)
                self._send(200, {"ok": True})
            elif route == ("GET", "state"):
                self._send(200, fake.snapshot())
            else:
                self._send(404, {"error": f"no control route {method} /_fake/{route[1]}"})
        except (KeyError, TypeError, ValueError) as exc:
            self._send(400, {"error": str(exc)})

    def _media_file(self, name: str) -> None:
        """A published reel's bytes (its media_url); the thumbnail is an empty JPEG stand-in."""
        media_id, _, ext = name.partition(".")
        try:
            raw = self.fake.media_bytes(media_id) if ext == "mp4" else b"\xff\xd8\xff\xd9"
        except KeyError:
            self._fail(404, {"error": f"no media {media_id}"})
        self.send_response(200)
        self.send_header("Content-Type", "video/mp4" if ext == "mp4" else "image/jpeg")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _settings(self, spec: dict[str, Any]) -> None:
        fake = self.fake
        if "processing_delay" in spec:
            fake.set_processing_delay(spec["processing_delay"])
        if "container_lifetime" in spec:
            fake.set_container_lifetime(spec["container_lifetime"])
        if "publish_limit" in spec:
            fake.set_publish_limit(
                spec["publish_limit"], spec.get("publish_window", PUBLISH_WINDOW)
            )
        if "call_budget" in spec:
            budget = spec["call_budget"] or {}
            fake.set_call_budget(
                budget.get("calls"),
                budget.get("window_s", 3600.0),
                budget.get("code", 4),
                budget.get("status", 403),
            )
