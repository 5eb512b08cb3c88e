"""The Instagram fake's access tokens: checked on every graph and upload request, refreshed."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, NoReturn
from urllib.parse import urlsplit

from fakes.common import new_secret
from fakes.instagram.plumbing import Plumbing
from fakes.instagram.protocol import APP_ID, TOKEN_LIFETIME, graph_error


class Tokens(Plumbing):
    """Access tokens: who a request's token belongs to, revoked, expired (early, by a
    fault, too) and refreshed."""

    def _token(self, params: dict[str, str]) -> str | None:
        token = params.get("access_token")
        if token:
            return token
        auth = self.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() in ("bearer", "oauth") and value.strip():
            return value.strip()
        return None

    def _auth(self, params: dict[str, str], kind: str) -> str:
        """The IG user id the token belongs to; a code 190/104 answer when there is none."""
        token = self._token(params)
        if token is None:
            self._fail(
                400, graph_error("An access token is required to request this resource.", 104)
            )
        return self._account_of(str(token), kind)

    def _account_of(self, token: str, kind: str) -> str:
        st = self.fake.state
        with st.lock:
            grant = st.data["tokens"].get(token)
            fault = None
            if grant is not None and grant["revoked"] is None:
                fault = self.fake.faults.take(kind, "revoke_token")
            if grant is not None and fault is not None:
                grant["revoked"] = 458
                st.save()
            if grant is None:
                self._fail_token("Invalid OAuth access token - Cannot parse access token", None)
            if grant["revoked"] is not None:
                self._fail_token(_revoked_message(int(grant["revoked"])), int(grant["revoked"]))
            self._expire_early(grant, kind)
            # An early expiry leaves the token refreshable (the grant behind it stands).
            early = grant.get("expired_early") and kind != "refresh"
            if early or time.time() >= grant["expires"]:
                ended = time.time() if early else grant["expires"]
                when = datetime.fromtimestamp(ended, UTC).strftime("%A, %d-%b-%y %H:%M:%S UTC")
                self._fail_token(
                    f"Error validating access token: Session has expired on {when}.", 463
                )
            return str(grant["account"])

    def _expire_early(self, grant: dict[str, Any], kind: str) -> None:
        """The expire_token fault, on a live token's request that is not a refresh (a token
        issued after an early expiry is spared its first request). Call with the state lock."""
        live = grant["revoked"] is None and time.time() < grant["expires"]
        if kind == "refresh" or not live or grant.get("expired_early"):
            return
        if grant.pop("spared", False):
            self.fake.state.save()
            return
        fault = self.fake.faults.pop_first(
            lambda f: f["fault"] == "expire_token" and f.get("on") in (None, kind)
        )
        if fault is not None:
            grant["expired_early"] = True
            spare = bool(fault.get("spare", True))
            self.fake.state.data["accounts"][grant["account"]]["expired_early"] = spare
            self.fake.state.save()

    def _fail_token(self, message: str, subcode: int | None) -> NoReturn:
        url = urlsplit(self.path)
        with self.fake.state.lock:
            self.fake.state.data["unauthorized"].append(self._kind)
            self.fake.state.data["refused"].append(f"{self.command} {url.path}?{url.query}")
            self.fake.state.save()
        challenge = f'OAuth "Facebook Platform" "invalid_token" "{message}"'
        self._fail(400, graph_error(message, 190, subcode), {"WWW-Authenticate": challenge})

    def _refresh(self, params: dict[str, str]) -> None:
        if params.get("grant_type") != "ig_refresh_token":
            self._fail(400, graph_error("Unsupported grant_type: use ig_refresh_token", 100))
        token = params.get("access_token")
        if not token:
            self._fail(
                400, graph_error("An access token is required to request this resource.", 104)
            )
        account = self._account_of(str(token), "refresh")
        fresh = new_secret("IGAA", 48).replace("-", "x").replace("_", "y")
        with self.fake.state.lock:
            self.fake._grant(account, fresh, TOKEN_LIFETIME)
            if self.fake.state.data["accounts"][account].pop("expired_early", False):
                self.fake.state.data["tokens"][fresh]["spared"] = True
            self.fake.state.save()
        self._send(
            200, {"access_token": fresh, "token_type": "bearer", "expires_in": TOKEN_LIFETIME}
        )


def _revoked_message(subcode: int) -> str:
    return {
        458: f"Error validating access token: The user has not authorized application {APP_ID}.",
        460: "Error validating access token: The session has been invalidated because the user "
        "changed their password or Facebook has changed the session for security reasons.",
        467: "Error validating access token: The session is invalid because the user logged out.",
    }.get(subcode, "Error validating access token: The session is invalid.")
