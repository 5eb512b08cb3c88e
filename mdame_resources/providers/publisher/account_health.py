"""What the post publishers' health checks share (TikTok's, Instagram's): the active accounts of
one platform in the dimensions in scope, and each one's finding, its subject
`<dimension>/<handle>`. An account marked needs_reauth, or without a stored grant, is a FAIL
naming the fix without a call; the others go to the platform's probe, under the dimension's
pipeline lock. A check marks nothing: a refused grant is said, with `mdame accounts connect` as
the fix, and left for the runs; the one write is a rotated token, stored as the publisher
stores it (fenced by the lock, so no run holds the grant it replaces)."""

from __future__ import annotations

from collections.abc import Callable

from mdame_core.state import Account, StateStore
from mdame_domain.doctor import Redactor, Status, first_line
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.publisher.grants import reconnect_command

# (state, dimension slug, account, the reconnect fix) -> the account's verdict and message.
Probe = Callable[[StateStore, str, Account, str], tuple[Status, str]]


def reconnect_fix(platform: str, slug: str, handle: str) -> str:
    """The command that connects the account again (YouTube's flow is the default one)."""
    return f"run {reconnect_command(platform, slug, handle)}"


def active_accounts(scope: HealthScope | None, platform: str) -> list[tuple[str, Account]]:
    """(dimension slug, account) of each active `platform` account of the dimensions in scope,
    read through scope.state."""
    if scope is None or scope.state is None:
        raise ValueError(f"the {platform} health check reads the accounts through scope.state")
    return [
        (slug, account)
        for slug in scope.slugs
        for account in scope.state.list_accounts(slug, active_only=True)
        if account.platform == platform
    ]


def account_finding(
    scope: HealthScope,
    slug: str,
    account: Account,
    probe: Probe,
    redact: Redactor,
    raises: tuple[type[Exception], ...] = (),
) -> Health:
    """One account's finding: its mark and stored grant read, then `probe` under the
    dimension's pipeline lock (scope.lock), since a probe's token refresh may rotate the grant
    and only the lock's holder may store it. A probe that broke is a FAIL with its exception's
    name, never a traceback, unless it is one of `raises` (a fault of the provider's own, not
    the account's). The message goes through `redact`."""
    state = scope.state
    if state is None:
        raise ValueError("an account's health is read through scope.state")
    reconnect = reconnect_fix(account.platform, slug, account.handle)
    if state.account_status(account.id).needs_reauth:
        status, message = Status.FAIL, f"marked needs_reauth: {reconnect}"
    elif state.account_grant(account.id) is None:
        status, message = Status.FAIL, f"no stored grant: {reconnect}"
    elif scope.lock is None:
        status, message = (
            Status.SKIP,
            "not checked: a token refresh may rotate the grant, and this check holds no "
            "pipeline lock to store it under",
        )
    else:
        try:
            with scope.lock(slug) as fenced:
                if fenced is None:
                    status, message = (
                        Status.WARN,
                        f"not checked now: a run of {slug} holds its pipeline lock, and a token "
                        "refresh here could rotate the grant it uses; check again once it ends",
                    )
                else:
                    status, message = probe(fenced, slug, account, reconnect)
        except raises:
            raise
        except Exception as exc:
            status, message = Status.FAIL, f"{type(exc).__name__}: {first_line(str(exc))}"
    return Health(status, redact(message), f"{slug}/{account.handle}")
