"""Access tokens and rate limits on the TikTok fake: who a request is from, and whether it may."""

from __future__ import annotations

from urllib.parse import urlsplit

from fakes.tiktok.plumbing import Plumbing


class Auth(Plumbing):
    """The bearer's access token, its scopes, and the per-minute limits it is counted in."""

    def _expire_early(self, kind: str, query: dict[str, str]) -> None:
        """The expire_token fault, on a request with a live access token (not spared: a spared
        token is spared this once) or on a chunk (its creator's tokens)."""
        fake, st = self.fake, self.fake.state
        if kind in ("token", "control", ""):
            return
        with st.lock:
            if kind == "chunk":
                found = [
                    p["open_id"]
                    for p in st.data["publishes"].values()
                    if p["upload_id"] == query.get("upload_id")
                ]
                open_id = found[0] if found else None
            else:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                grant = st.data["tokens"].get(token)
                live = grant is not None and not grant["revoked"]
                if not live or fake.clock() >= grant["expires_at"]:
                    return
                if grant.pop("spared", False):
                    st.save()
                    return
                open_id = grant["open_id"]
            if open_id is None:
                return
            fault = fake.faults.pop_first(
                lambda f: f["fault"] == "expire_token" and f.get("on") in (None, kind)
            )
            if fault is not None:
                fake.expire_tokens(open_id, bool(fault.get("spare", True)))

    def _caller(self, *scopes: str) -> tuple[str, str] | None:
        """(open_id, access token) of the bearer; None after a 401 was sent. Any one of
        `scopes` must have been granted."""
        token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        st = self.fake.state
        with st.lock:
            found = st.data["tokens"].get(token)
            valid = (
                found is not None
                and not found["revoked"]
                and self.fake.clock() < found["expires_at"]
            )
            if valid and found is not None and self.fake.faults.take("revoked") is not None:
                self.fake.revoke(found["open_id"])
                valid = False
        if not valid or found is None:
            with st.lock:
                route = self.routes.get(("POST", urlsplit(self.path).path.rstrip("/")))
                st.data["unauthorized"].append(route[1] if route else "")
                st.save()
            self._api("access_token_invalid", "The access token is invalid or not found.")
            return None
        if scopes and not set(scopes) & set(found["scope"].split(",")):
            self._api("scope_not_authorized", f"The user did not authorize {scopes[0]}.")
            return None
        return str(found["open_id"]), token

    def _allowed(self, open_id: str, key: str, bucket: str) -> bool:
        """Counts the request in the bucket's sliding window; False after a 429 was sent."""
        fake, st = self.fake, self.fake.state
        now = fake.clock()
        with st.lock:
            times = st.data["rate"].setdefault(key, {}).setdefault(bucket, [])
            times[:] = [t for t in times if t > now - fake.rate_window]
            if len(times) < int(st.data["limits"][f"{bucket}_per_minute"]):
                times.append(now)
                st.save()
                return True
            st.data["throttled"][open_id] = st.data["throttled"].get(open_id, 0) + 1
            st.save()
        self._api("rate_limit_exceeded", "Your request is blocked by the API rate limit.")
        return False
