"""The request plumbing every part of the YouTube handler shares: the body, the bearer token."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fakes.common import JsonHandler
from fakes.youtube.protocol import INVALID_TOKEN, UNAUTHENTICATED

if TYPE_CHECKING:
    from fakes.youtube.server import FakeYouTube


class Plumbing(JsonHandler):
    """A request's body, and its bearer token: expired or revoked by a fault, or whose."""

    fake: FakeYouTube

    def _body(self, limit: int | None = None) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if limit is not None:
            length = min(length, limit)
        return self.rfile.read(length) if length else b""

    def _bearer(self) -> str:
        return self.headers.get("Authorization", "").removeprefix("Bearer ").strip()

    def _expire_early(self, kind: str) -> None:
        """The expire_token and revoked faults, on a request with a live token not spared (a
        spared token is spared this once): the token is forgotten, so the request is answered
        401; revoked, every token of the channel too, and its grant."""
        token, st = self._bearer(), self.fake.state
        with st.lock:
            channel = st.data["tokens"].get(token)
            if channel is None:
                return
            if token in st.data["spared"]:
                st.data["spared"].remove(token)
                st.save()
                return
            fault = self.fake.faults.pop_first(
                lambda f: f["fault"] in ("expire_token", "revoked") and f.get("on") in (None, kind)
            )
            if fault is not None and fault["fault"] == "revoked":
                tokens = st.data["tokens"]
                for dead in [t for t, c in tokens.items() if c == channel]:
                    del tokens[dead]
                st.data["channels"][channel]["revoked"] = True
                st.save()
            elif fault is not None:
                del st.data["tokens"][token]
                st.data["channels"][channel]["expired_early"] = bool(fault.get("spare", True))
                st.save()

    def _channel(self, kind: str = "") -> str | None:
        """The channel the bearer token belongs to; None after a 401 was sent."""
        st = self.fake.state
        with st.lock:
            channel = st.data["tokens"].get(self._bearer())
            if channel is None:
                st.data["unauthorized"].append(kind or "list")
                st.save()
        if channel is None:
            self._send(401, UNAUTHENTICATED, {"WWW-Authenticate": INVALID_TOKEN})
        return channel
