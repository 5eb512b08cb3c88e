"""The production publisher: the YouTube Data API, each account's channel opened with its
sealed grant."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from mdame_core import settings
from mdame_core.state import Account, StateStore
from mdame_domain.analytics import VideoCounters, batches, parse_statistics
from mdame_domain.channel import ChannelApi, ChannelError, GrantRevoked, TransferInterrupted
from mdame_domain.credentials import CredentialError
from mdame_domain.doctor import Redactor, Status, display_url, first_line
from mdame_resources.health import Health, HealthScope, resolved, setting
from mdame_resources.providers.publisher.grants import account_grant, open_account_grant
from mdame_resources.providers.publisher.job import StatisticsUnavailable
from mdame_resources.providers.publisher.listing import metered_call
from mdame_resources.providers.publisher.resource import PublisherResource


class YouTubePublisher(PublisherResource):
    """The YouTube Data API: each account's channel is opened with its sealed grant."""

    client_secrets_file: str = ""  # Google's installed-app client JSON (client id and secret)
    root_url: str = ""  # empty: MDAME_YOUTUBE_ROOT_URL, else Google's
    token_uri: str = ""  # empty: MDAME_GOOGLE_TOKEN_URI, else Google's
    master_key_file: str = ""  # empty: MDAME_MASTER_KEY, else $MDAME_HOME/master.key
    timeout_s: float = 60.0

    def _client(self) -> tuple[str, str]:
        if not self.client_secrets_file:
            raise RuntimeError("YouTubePublisher needs client_secrets_file")
        raw = json.loads(Path(self.client_secrets_file).read_text())
        app = raw.get("installed") or raw.get("web") or {}
        return str(app["client_id"]), str(app["client_secret"])

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> ChannelApi:
        """The account's API client; its refresh token is decrypted here, in memory only."""
        from mdame_resources.providers.youtube_api import YouTubeApi

        grant = account_grant(state, account, dimension_slug, self.master_key_file)
        client_id, client_secret = self._client()
        return YouTubeApi(
            grant.refresh_token,
            client_id,
            client_secret,
            root_url=self.root_url or None,
            token_uri=self.token_uri or None,
            timeout_s=self.timeout_s,
        )

    def set_deadline(self, api: Any, deadline: float) -> None:
        api.deadline = deadline  # a YouTubeApi: its session requests and their token refresh

    def video_statistics(
        self,
        state: StateStore,
        account: Account,
        dimension_slug: str,
        videos: Mapping[str, date],
        day: date,
    ) -> dict[str, VideoCounters]:
        """videos.list(part="statistics") in calls of up to 50 ids, 1 unit each, charged to the
        account's units bucket through the ledger before each call. Raises
        StatisticsUnavailable (the ledger or the channel refused: quota, grant, API error) or
        AccountUnavailable (no stored grant)."""
        api = self.channel(state, account, dimension_slug)
        out: dict[str, VideoCounters] = {}
        for ids in batches(list(videos)):
            try:
                items = metered_call(
                    state,
                    account.id,
                    f"analytics:{dimension_slug}:{day.isoformat()}",
                    partial(api.videos, ids, "statistics"),
                )
            except (ChannelError, GrantRevoked) as exc:
                raise StatisticsUnavailable(f"account {account.handle}: {exc}") from None
            out.update(parse_statistics(items))
        return out

    # -- health ----------------------------------------------------------------------------
    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """Per active YouTube account of the dimensions in scope (read through scope.state):
        its stored grant opened as channel() opens it, the token refreshed, then
        channels.list(mine=True) (1 quota unit, not charged to the ledger). One finding per
        account, its subject `<dimension>/<handle>`; one FAIL when there is none."""
        scope = scope or HealthScope()
        if scope.state is None:
            raise ValueError("the YouTube health check reads the accounts through scope.state")
        probe = resolved(self, timeout_s=timeout)
        secrets_name = setting(self, "client_secrets_file")[1]  # the variable, when one
        redact = Redactor()
        found: list[Health] = []
        for slug in scope.slugs:
            for account in scope.state.list_accounts(slug, active_only=True):
                if account.platform != "youtube":
                    continue
                try:
                    status, message = probe._account_health(
                        scope.state, slug, account, secrets_name, redact
                    )
                except Exception as exc:
                    status = Status.FAIL
                    message = f"{type(exc).__name__}: {first_line(str(exc))}"
                found.append(Health(status, redact(message), f"{slug}/{account.handle}"))
        if not found:
            found.append(Health(Status.FAIL, "no active YouTube account in the database"))
        return found

    def _account_health(
        self, state: StateStore, slug: str, account: Account, secrets_name: str, redact: Redactor
    ) -> tuple[Status, str]:
        """One account's check (see health_check) on a resolved copy of the publisher; the
        secrets it opens join `redact`."""
        from mdame_resources.providers.youtube_api import (
            GOOGLE_TOKEN_URI,
            ROOT_URL_VAR,
            TOKEN_URI_VAR,
            YouTubeApi,
        )

        reconnect = f"run `mdame accounts connect {slug} --account {account.handle}`"
        if state.account_status(account.id).needs_reauth:
            return Status.FAIL, f"marked needs_reauth: {reconnect}"
        stored = state.account_grant(account.id)
        if stored is None:
            return Status.FAIL, f"no stored grant: {reconnect}"
        if not self.client_secrets_file:
            return Status.FAIL, f"{secrets_name} is not set"
        try:
            client_id, client_secret = self._client()
        except (OSError, ValueError, KeyError, AttributeError) as exc:
            return (
                Status.FAIL,
                f"{secrets_name}: unreadable OAuth client ({type(exc).__name__})",
            )
        redact.add(client_secret)
        try:
            # As channel() opens it: a key a rotation replaced works for the grace period.
            grant = open_account_grant(stored, account, self.master_key_file)
        except (CredentialError, OSError) as exc:
            return Status.FAIL, f"the stored grant cannot be opened: {first_line(str(exc))}"
        refresh_token = str(grant.get("refresh_token", ""))
        redact.add(refresh_token)
        root = self.root_url or settings.raw(ROOT_URL_VAR) or "https://youtube.googleapis.com"
        where = display_url(root)
        api = YouTubeApi(
            refresh_token,
            client_id,
            client_secret,
            root_url=self.root_url or None,
            token_uri=self.token_uri or None,
            timeout_s=self.timeout_s,
        )
        del refresh_token, grant
        try:
            uploads = api.uploads_playlist()  # channels.list(mine=True): refreshes the token first
        except GrantRevoked:
            return Status.FAIL, f"token refresh refused (invalid_grant): {reconnect}"
        except TransferInterrupted as exc:
            return Status.FAIL, f"token refresh failed ({first_line(str(exc))})"
        except ChannelError as exc:
            return Status.FAIL, f"channels.list at {where} answered HTTP {exc.status} {exc.reason}"
        except OSError as exc:
            token_uri = self.token_uri or settings.raw(TOKEN_URI_VAR) or GOOGLE_TOKEN_URI
            return Status.FAIL, (
                f"not reachable: {where} or the token endpoint {display_url(token_uri)} "
                f"({type(exc).__name__})"
            )
        except (IndexError, KeyError) as exc:
            return (
                Status.FAIL,
                f"channels.list at {where}: unexpected answer ({type(exc).__name__})",
            )
        return Status.OK, f"token refreshed; channels.list answers (uploads playlist {uploads})"
