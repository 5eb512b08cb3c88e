"""Google OAuth on the YouTube fake: the token endpoint and the consent screen."""

from __future__ import annotations

from urllib.parse import parse_qs

from fakes.common import new_secret
from fakes.youtube.plumbing import Plumbing


class OAuth(Plumbing):
    """Google's token endpoint (refresh and code grants) and the consent screen."""

    def token(self, _query: dict[str, str]) -> None:
        form = {k: v[-1] for k, v in parse_qs(self._body().decode()).items()}
        st = self.fake.state
        if form.get("grant_type") == "authorization_code":
            self._exchange_code(form)
            return
        if form.get("grant_type") != "refresh_token":
            self._send(400, {"error": "unsupported_grant_type"})
            return
        if self.fake.faults.take("invalid_client") is not None:
            self._send(401, {"error": "invalid_client", "error_description": "Unauthorized"})
            return
        with st.lock:
            found = [
                cid
                for cid, ch in st.data["channels"].items()
                if ch["refresh_token"] == form.get("refresh_token") and not ch.get("revoked")
            ]
            if self.fake.faults.take("invalid_grant") is not None and found:
                st.data["channels"][found[0]]["revoked"] = True
                st.save()
                found = []
            if not found:
                self._send(
                    400,
                    {
                        "error": "invalid_grant",
                        "error_description": "Token has been expired or revoked.",
                    },
                )
                return
            access = new_secret("ya29.fake-", 24)
            st.data["tokens"][access] = found[0]
            if st.data["channels"][found[0]].pop("expired_early", False):
                st.data["spared"].append(access)
            st.save()
        self._send(
            200,
            {
                "access_token": access,
                "expires_in": 3599,
                "token_type": "Bearer",
                "scope": form.get("scope", ""),
            },
        )

    def authorize(self, query: dict[str, str]) -> None:
        """The consent screen, already agreed: back to the redirect URI with a code for the
        channel named by login_hint (or the only channel)."""
        st = self.fake.state
        with st.lock:
            channels = st.data["channels"]
            hint = query.get("login_hint")
            found = [c for c, ch in channels.items() if hint in (None, ch["handle"])]
            if len(found) != 1 or "redirect_uri" not in query:
                self._send(400, {"error": "invalid_request"})
                return
            code = new_secret("code-", 12)
            st.data.setdefault("codes", {})[code] = found[0]
            st.save()
        target = f"{query['redirect_uri']}?code={code}&state={query.get('state', '')}"
        self._send(302, None, {"Location": target})

    def _exchange_code(self, form: dict[str, str]) -> None:
        st = self.fake.state
        with st.lock:
            channel = st.data.setdefault("codes", {}).pop(form.get("code", ""), None)
            if channel is None:
                self._send(400, {"error": "invalid_grant"})
                return
            ch = st.data["channels"][channel]
            ch.pop("revoked", None)
            access = new_secret("ya29.fake-", 24)
            st.data["tokens"][access] = channel
            st.save()
        self._send(
            200,
            {
                "access_token": access,
                "refresh_token": ch["refresh_token"],
                "expires_in": 3599,
                "token_type": "Bearer",
                "scope": " ".join(
                    [
                        "https://www.googleapis.com/auth/youtube.upload",
                        "https://www.googleapis.com/auth/youtube.readonly",
                    ]
                ),
            },
        )
