"""Business Login for Instagram on the fake: consent, the code's exchange, the long-lived token."""

from __future__ import annotations

from urllib.parse import urlencode

from fakes.common import new_secret
from fakes.instagram.protocol import TOKEN_LIFETIME, graph_error
from fakes.instagram.tokens import Tokens


class Login(Tokens):
    """Business Login for Instagram."""

    def _login(self, method: str, query: str, parts: list[str]) -> None:
        """The consent (GET /oauth/authorize, agreed at once: the account is the only one, or
        the one named by `username`, not a Meta parameter), the code's exchange for a one-hour
        token (POST /oauth/access_token) and that token's for a long-lived one
        (GET /access_token?grant_type=ig_exchange_token)."""
        params = self._params(query)
        st = self.fake.state
        if parts == ["oauth", "authorize"] and method == "GET":
            with st.lock:
                found = [
                    uid
                    for uid, a in st.data["accounts"].items()
                    if params.get("username") in (None, a["username"])
                ]
                if len(found) != 1 or not params.get("redirect_uri"):
                    self._fail(400, graph_error("Invalid redirect_uri or account", 100))
                code = new_secret("AQ", 24)
                st.data.setdefault("codes", {})[code] = {
                    "account": found[0],
                    "redirect_uri": params["redirect_uri"],
                }
                st.save()
            back = urlencode({"code": code, "state": params.get("state", "")})
            target = f"{params['redirect_uri']}?{back}#_"  # Meta appends "#_"
            self._send(302, None, {"Location": target})
            return
        if parts == ["oauth", "access_token"] and method == "POST":
            with st.lock:
                code = st.data.setdefault("codes", {}).pop(params.get("code", ""), None)
                if code is None or code["redirect_uri"] != params.get("redirect_uri"):
                    self._fail(
                        400,
                        {"error_type": "OAuthException", "code": 400,
                         "error_message": "Invalid authorization code"},
                    )  # fmt: skip
                short = new_secret("IGQ", 32)
                self.fake._grant(code["account"], short, 3600)
                st.save()
            self._send(
                200,
                {"data": [{"access_token": short, "user_id": code["account"],
                           "permissions": "instagram_business_basic,"
                                          "instagram_business_content_publish"}]},
            )  # fmt: skip
            return
        if parts == ["access_token"] and method == "GET":
            if params.get("grant_type") != "ig_exchange_token" or not params.get("client_secret"):
                self._fail(400, graph_error("Unsupported grant_type: use ig_exchange_token", 100))
            account = self._account_of(str(params.get("access_token", "")), "refresh")
            fresh = new_secret("IGAA", 48).replace("-", "x").replace("_", "y")
            with st.lock:
                self.fake._grant(account, fresh, TOKEN_LIFETIME)
                st.save()
            self._send(
                200, {"access_token": fresh, "token_type": "bearer", "expires_in": TOKEN_LIFETIME}
            )
            return
        self._fail(400, graph_error(f"Unsupported {method} request", 100))
