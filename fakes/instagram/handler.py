"""The Instagram fake's request handler: each request routed to the part that answers it."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

from fakes.common import Drop
from fakes.instagram.containers import Containers
from fakes.instagram.control import Control
from fakes.instagram.faults import GRAPH_KINDS
from fakes.instagram.login import Login
from fakes.instagram.media import Media
from fakes.instagram.plumbing import Answered
from fakes.instagram.protocol import (
    DEFAULT_VERSION,
    THROTTLE_MESSAGES,
    VERSION_PATH,
    graph_error,
    no_object,
)
from fakes.instagram.publishing import Publishing
from fakes.instagram.upload import Upload


class Handler(Control, Media, Publishing, Upload, Containers, Login):
    """Every request routed to its part: control, upload, login, then the graph."""

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        st = self.fake.state
        with st.lock:
            st.data["requests"].append(f"{method} {url.path}?{url.query}")
        parts = [p for p in url.path.split("/") if p]
        try:
            if parts[:1] == ["_fake"]:
                self._control(method, parts[1:])
            elif parts[:1] == ["ig-api-upload"]:
                self._slow("upload")
                self._upload(method, parts[1:])
            elif parts[:1] == ["oauth"] or parts == ["access_token"]:
                self._login(method, url.query, parts)
            else:
                self._graph(method, url.query, parts)
        except Answered:
            return
        except Drop as drop:
            self._drop(drop.reset)

    def _graph(self, method: str, query: str, parts: list[str]) -> None:
        params = self._params(query)
        version = DEFAULT_VERSION
        if parts and VERSION_PATH.match(parts[0]):
            version, parts = parts[0], parts[1:]
        kind, handler = self._route(method, parts)
        self._kind = kind
        self._slow(kind)
        if kind in GRAPH_KINDS or kind == "refresh":
            self._throttle(kind)
        if kind == "refresh":
            self._refresh(params)
            return
        account = self._auth(params, kind)
        handler(self, account, parts, params, version)

    def _route(self, method: str, parts: list[str]) -> tuple[str, Any]:
        st = self.fake.state
        if parts == ["refresh_access_token"] and method == "GET":
            return "refresh", None
        if len(parts) == 2 and method == "POST" and parts[1] == "media":
            return "create", Containers.create_container
        if len(parts) == 2 and method == "POST" and parts[1] == "media_publish":
            return "publish", Publishing.publish
        if len(parts) == 2 and method == "GET" and parts[1] == "media":
            return "list", Media.list_media
        if len(parts) == 2 and method == "GET" and parts[1] == "content_publishing_limit":
            return "limit", Publishing.publishing_limit
        if len(parts) == 2 and method == "GET" and parts[1] == "insights":
            return "insights", Media.insights
        if len(parts) == 1 and method == "GET":
            with st.lock:
                if parts[0] in st.data["containers"]:
                    return "status", Containers.container
                if parts[0] in st.data["media"]:
                    return "media", Media.media_node
            return "account", Media.account_node
        return "account", Handler.unsupported

    def _throttle(self, kind: str) -> None:
        st = self.fake.state
        fault = self.fake.faults.take(kind, "throttle")
        with st.lock:
            budget = st.data["settings"].get("call_budget")
            now = time.time()
            code, status, used = 4, 403, 0
            if budget is not None:
                calls = [t for t in st.data["calls"] if t > now - float(budget["window"])]
                st.data["calls"] = calls
                code, status, used = int(budget["code"]), int(budget["status"]), len(calls)
            over = budget is not None and used >= int(budget["calls"])
            if fault is not None:
                code = int(fault.get("code", 4))
                status = int(fault.get("status", 403))
            elif not over:
                if budget is not None:
                    st.data["calls"].append(now)
                return
        pct = 100 if budget is None else min(100, round(100 * used / max(1, budget["calls"])))
        usage = json.dumps({"call_count": pct, "total_cputime": 0, "total_time": 0})
        message = THROTTLE_MESSAGES.get(code, THROTTLE_MESSAGES[4])
        self._fail(status, graph_error(message, code, transient=True), {"X-App-Usage": usage})

    def unsupported(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._fail(400, no_object(self.command, "/".join(parts) or "/"))
