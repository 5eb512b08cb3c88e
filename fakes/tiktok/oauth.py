"""Login Kit on the TikTok fake: the token endpoint and the consent page."""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qs, quote

from fakes.common import new_secret
from fakes.tiktok.plumbing import Plumbing
from fakes.tiktok.protocol import OAUTH_ERROR_STATUS, log_id


class OAuth(Plumbing):
    """Login Kit: the token endpoint (codes, refreshes that rotate) and the consent page."""

    def _oauth_error(self, error: str, description: str) -> None:
        body = {"error": error, "error_description": description, "log_id": log_id()}
        self._send(OAUTH_ERROR_STATUS, body)

    def token(self, _query: dict[str, str]) -> None:
        form = {k: v[-1] for k, v in parse_qs(self._body().decode()).items()}
        fake, st = self.fake, self.fake.state
        key, secret = form.get("client_key", ""), form.get("client_secret", "")
        if not key or not secret or fake.client_key not in (None, key):
            self._oauth_error("invalid_client", "Client key or secret is invalid.")
            return
        if fake.client_secret not in (None, secret):
            self._oauth_error("invalid_client", "Client key or secret is invalid.")
            return
        grant = form.get("grant_type")
        with st.lock:
            if grant == "authorization_code":
                code = st.data["codes"].pop(form.get("code", ""), None)
                if code is None or code["redirect_uri"] not in ("", form.get("redirect_uri")):
                    self._oauth_error("invalid_grant", "Authorization code is expired.")
                    return
                verifier = form.get("code_verifier", "")
                challenge = code.get("code_challenge", "")
                if challenge and hashlib.sha256(verifier.encode()).hexdigest() != challenge:
                    self._oauth_error(
                        "invalid_request", "Code verifier or code challenge is invalid."
                    )
                    return
                open_id = code["open_id"]
                creator = st.data["creators"][open_id]
                creator["revoked"] = False
                creator["refresh_token"] = new_secret("rft.", 32)
                creator["refresh_expires_at"] = fake.clock() + fake.refresh_token_ttl
            elif grant == "refresh_token":
                sent = form.get("refresh_token", "")
                found = [
                    oid
                    for oid, c in st.data["creators"].items()
                    if sent and c["refresh_token"] == sent
                    if not c["revoked"] and fake.clock() < c["refresh_expires_at"]
                ]
                if found and fake.faults.take("invalid_grant") is not None:
                    fake.revoke(found[0])
                    found = []
                if not found:
                    self._oauth_error("invalid_grant", "Refresh token is invalid or expired.")
                    return
                open_id = found[0]
                creator = st.data["creators"][open_id]
                # Rotation: the refresh token sent stops working once a new one is issued.
                creator["refresh_token"] = new_secret("rft.", 32)
            else:
                self._oauth_error("unsupported_grant_type", f"grant_type {grant!r}")
                return
            access = new_secret("act.", 32)
            scope = ",".join(creator["scopes"])
            st.data["tokens"][access] = {
                "open_id": open_id,
                "expires_at": fake.clock() + fake.access_token_ttl,
                "scope": scope,
                "revoked": False,
            }
            if creator.pop("expired_early", False):
                st.data["tokens"][access]["spared"] = True
            st.save()
            answer = {
                "access_token": access,
                "expires_in": int(fake.access_token_ttl),
                "open_id": open_id,
                "refresh_expires_in": int(creator["refresh_expires_at"] - fake.clock()),
                "refresh_token": creator["refresh_token"],
                "scope": scope,
                "token_type": "Bearer",
            }
        self._send(200, answer)

    def authorize(self, query: dict[str, str]) -> None:
        """The consent page, already agreed: back to redirect_uri with a code and the state.
        The creator is the only one, or the one named by `username` (not a TikTok parameter)."""
        creators = self.fake.state.data["creators"]
        hint = query.get("username")
        found = [o for o, c in creators.items() if hint in (None, c["username"])]
        if len(found) != 1 or "redirect_uri" not in query:
            self._send(400, {"error": "invalid_request"})
            return
        code = self.fake.issue_code(
            found[0], query["redirect_uri"], query.get("code_challenge", "")
        )
        scopes = quote(query.get("scope", ""), safe=",")
        target = (
            f"{query['redirect_uri']}?code={quote(code)}&scopes={scopes}"
            f"&state={quote(query.get('state', ''))}"
        )
        self._send(302, None, {"Location": target})
