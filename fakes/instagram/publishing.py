"""Publishing on the Instagram fake: media_publish and the rolling publishing limit."""

from __future__ import annotations

import base64
import secrets
import time

from fakes.common import Drop
from fakes.instagram.protocol import graph_error, ig_error, server_error
from fakes.instagram.state import container_status
from fakes.instagram.tokens import Tokens

# media_publish on a container in these states.
_REFUSED = {"EXPIRED": "expired", "ERROR": "upload_failed", "IN_PROGRESS": "not_ready"}


class Publishing(Tokens):
    """media_publish and the account's content publishing limit."""

    def publish(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        faults, st = self.fake.faults, self.fake.state
        fault = faults.take("publish", "publish_5xx", "lost_publish")
        if fault is not None and fault["fault"] == "publish_5xx" and not fault.get("published"):
            self._fail(int(fault.get("status", 500)), server_error())
        cid = params.get("creation_id", "")
        if not cid:
            self._fail(400, graph_error("(#100) The parameter creation_id is required", 100))
        now = time.time()
        with st.lock:
            c = st.data["containers"].get(cid)
            settings = st.data["settings"]
            code = container_status(c, now, settings) if c and c["account"] == account else None
            if code in (None, "PUBLISHED"):
                self._fail(400, ig_error("builder_missing", creation_id=cid))
            if c is None or code in _REFUSED:
                self._fail(400, ig_error(_REFUSED.get(str(code), "builder_missing")))
            window = float(settings["publish_window"])
            if st.publishes_since(account, now - window) >= int(settings["publish_limit"]):
                self._fail(400, ig_error("publish_limit"))
            media_id = st.new_id("18", 15)
            shortcode = base64.urlsafe_b64encode(secrets.token_bytes(8)).decode()[:11]
            p = c["params"]
            st.data["media"][media_id] = {
                "id": media_id,
                "account": account,
                "container": cid,
                "caption": p.get("caption", ""),
                "share_to_feed": str(p.get("share_to_feed", "true")).lower() != "false",
                "published": now,
                "seq": len(st.data["media"]),
                "shortcode": shortcode,
                "sha256": c["sha256"],
                "size": c["received"],
            }
            c["media_id"] = media_id
            st.data["publishes"].setdefault(account, []).append(now)
            st.save()
        if fault is not None and fault["fault"] == "lost_publish":
            raise Drop(reset=bool(fault.get("reset", False)))
        if fault is not None:  # publish_5xx after publishing: the caller cannot tell
            self._fail(int(fault.get("status", 500)), server_error())
        self._send(200, {"id": media_id})

    def publishing_limit(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        wanted = self._fields(params, ("quota_usage", "config"), "ContentPublishingLimit")
        st = self.fake.state
        now = time.time()
        with st.lock:
            settings = st.data["settings"]
            window = float(settings["publish_window"])
            since = now - window
            raw = params.get("since", "")
            if raw:
                if not raw.lstrip("-").isdigit() or int(raw) < now - window - 1:
                    self._fail(
                        400,
                        graph_error("(#100) since must be a Unix timestamp within 24 hours", 100),
                    )
                since = max(since, float(raw))
            values = {
                "quota_usage": st.publishes_since(account, since),
                "config": {
                    "quota_total": int(settings["publish_limit"]),
                    "quota_duration": int(window),
                },
            }
        self._send(200, {"data": [{k: values[k] for k in wanted or ["quota_usage"]}]})
