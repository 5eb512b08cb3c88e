"""Reading on the Instagram fake: the account node, published media and their insights."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fakes.instagram.protocol import (
    ACCOUNT_FIELDS,
    MEDIA_FIELDS,
    PAGE_DEFAULT,
    PAGE_MAX,
    REEL_METRICS,
    graph_error,
    no_object,
    server_error,
)
from fakes.instagram.tokens import Tokens


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _cursor(media_id: str) -> str:
    return base64.urlsafe_b64encode(media_id.encode()).decode()


def _uncursor(cursor: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(cursor.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None


class Media(Tokens):
    """The account, its published media (paged) and their insights."""

    def account_node(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        wanted = self._fields(params, ACCOUNT_FIELDS, "IGUser")
        st = self.fake.state
        with st.lock:
            a = st.data["accounts"][account]
            count = sum(1 for m in st.data["media"].values() if m["account"] == account)
        values = {
            "id": account,
            "user_id": account,
            "username": a["username"],
            "name": a["username"],
            "account_type": "BUSINESS",
            "media_count": count,
        }
        self._send(200, {k: values[k] for k in [*wanted, "id"]})

    def _media_fields(self, m: dict[str, Any], wanted: list[str]) -> dict[str, Any]:
        st = self.fake.state
        with st.lock:
            username = st.data["accounts"][m["account"]]["username"]
            stats = st.data["insights"].get(m["id"], {})
        link = f"https://www.instagram.com/reel/{m['shortcode']}/"
        values = {
            "id": m["id"],
            "caption": m["caption"],
            "comments_count": int(stats.get("comments", 0)),
            "is_comment_enabled": True,
            "is_shared_to_feed": m["share_to_feed"],
            "like_count": int(stats.get("likes", 0)),
            "media_product_type": "REELS",
            "media_type": "VIDEO",
            "media_url": f"{self.fake.base_url}_fake/media/{m['id']}.mp4",
            "owner": {"id": m["account"]},
            "permalink": link,
            "shortcode": m["shortcode"],
            "thumbnail_url": f"{self.fake.base_url}_fake/media/{m['id']}.jpg",
            "timestamp": _iso(m["published"]),
            "username": username,
        }
        return {k: values[k] for k in [*wanted, "id"]}

    def list_media(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        if self.fake.faults.take("list", "list_5xx") is not None:
            self._fail(500, server_error())
        wanted = self._fields(params, MEDIA_FIELDS, "ShadowIGMedia")
        raw_limit = params.get("limit", "")
        size = int(raw_limit) if raw_limit.isdigit() else PAGE_DEFAULT
        size = max(1, min(PAGE_MAX, size))
        items = self.fake.media(account)
        for bound, keep in (("since", lambda t, b: t >= b), ("until", lambda t, b: t <= b)):
            value = params.get(bound, "")
            if value.isdigit():
                items = [m for m in items if keep(m["published"], float(value))]
        ids = [m["id"] for m in items]
        start = 0
        if params.get("after"):
            anchor = _uncursor(params["after"])
            start = ids.index(anchor) + 1 if anchor in ids else len(ids)
        elif params.get("before"):
            anchor = _uncursor(params["before"])
            end = ids.index(anchor) if anchor in ids else 0
            start = max(0, end - size)
            items = items[:end]
        page = items[start : start + size]
        body: dict[str, Any] = {"data": [self._media_fields(m, wanted) for m in page]}
        if page:
            cursors = {"before": _cursor(page[0]["id"]), "after": _cursor(page[-1]["id"])}
            paging: dict[str, Any] = {"cursors": cursors}
            base = f"{self.fake.base_url}{version}/{parts[0]}/media"
            rest = {k: v for k, v in params.items() if k not in ("after", "before")}
            rest["limit"] = str(size)
            if start + size < len(items):
                paging["next"] = f"{base}?{urlencode({**rest, 'after': cursors['after']})}"
            if start > 0:
                paging["previous"] = f"{base}?{urlencode({**rest, 'before': cursors['before']})}"
            body["paging"] = paging
        self._send(200, body)

    def media_node(self, account: str, parts: list[str], params: dict, version: str) -> None:
        with self.fake.state.lock:
            m = dict(self.fake.state.data["media"][parts[0]])
        if m["account"] != account:
            self._fail(400, no_object(self.command, parts[0]))
        wanted = self._fields(params, MEDIA_FIELDS, "ShadowIGMedia")
        self._send(200, self._media_fields(m, wanted))

    def insights(self, account: str, parts: list[str], params: dict, version: str) -> None:
        st = self.fake.state
        with st.lock:
            m = st.data["media"].get(parts[0])
            stats = dict(st.data["insights"].get(parts[0], {}))
        if m is None or m["account"] != account:
            self._fail(400, no_object(self.command, parts[0]))
        metrics = [x.strip() for x in params.get("metric", "").split(",") if x.strip()]
        if not metrics:
            self._fail(400, graph_error("(#100) The parameter metric is required", 100))
        for i, name in enumerate(metrics):
            if name not in REEL_METRICS:
                self._fail(
                    400,
                    graph_error(
                        f"(#100) metric[{i}] must be one of the following values: "
                        + ", ".join(REEL_METRICS),
                        100,
                    ),
                )
        data = [
            {
                "name": name,
                "period": "lifetime",
                "values": [{"value": int(stats.get(name, 0))}],
                "title": name.replace("_", " ").capitalize(),
                "description": f"The lifetime {name.replace('_', ' ')} of the reel.",
                "id": f"{parts[0]}/insights/{name}/lifetime",
            }
            for name in metrics
        ]
        self._send(200, {"data": data})
