"""Dimensions and their accounts: upserts, which of them are active, and their reads."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.types.json import Jsonb

from mdame_core.state.client import ClientBase, JsonObject, _obj
from mdame_core.state.records import Account, Dimension


class Registry(ClientBase):
    """The dimension and account RPCs and reads."""

    def upsert_dimension(
        self, slug: str, title: str, config: JsonObject | None = None, active: bool = True
    ) -> int:
        return self._scalar("upsert_dimension", slug, title, _obj(config), active)

    def register_dimension(
        self,
        slug: str,
        title: str,
        config: JsonObject,
        active: bool,
        accounts: Sequence[JsonObject],
    ) -> int:
        """A dimension file's registration in one transaction: the dimension, its accounts
        ({platform, handle, daily_quota_units, quota_timezone, daily_posts, active}), and
        exactly the active ones publishing."""
        return self._scalar(
            "register_dimension", slug, title, _obj(config), active, Jsonb(list(accounts))
        )

    def set_dimensions_active(self, active_slugs: Sequence[str]) -> int:
        """Exactly the listed dimensions are active; returns how many flags changed."""
        return self._scalar("set_dimensions_active", list(active_slugs))

    def upsert_dimension_account(
        self,
        dimension_slug: str,
        platform: str,
        handle: str,
        daily_quota_units: int,
        active: bool = True,
        quota_timezone: str = "America/Los_Angeles",
        daily_posts: int = 100,
    ) -> int:
        """daily_posts: the uploads the account may start a quota day (its insert bucket)."""
        return self._scalar(
            "upsert_dimension_account",
            dimension_slug,
            platform,
            handle,
            daily_quota_units,
            active,
            quota_timezone,
            daily_posts,
        )

    def set_dimension_accounts_active(
        self, dimension_slug: str, accounts: Sequence[tuple[str, str]]
    ) -> int:
        """Exactly the listed (platform, handle) accounts of the dimension are active; accounts
        of other dimensions are untouched. Returns how many flags changed."""
        listed = [{"platform": platform, "handle": handle} for platform, handle in accounts]
        return self._scalar("set_dimension_accounts_active", dimension_slug, Jsonb(listed))

    def list_dimensions(self, *, active_only: bool = False) -> list[Dimension]:
        rows = self._select(
            """SELECT id, slug, title, config, active FROM mdame.dimensions
                WHERE active OR NOT %s ORDER BY slug""",
            [active_only],
        )
        return [Dimension(*row) for row in rows]

    def get_dimension(self, slug: str) -> Dimension | None:
        rows = self._select(
            "SELECT id, slug, title, config, active FROM mdame.dimensions WHERE slug = %s", [slug]
        )
        return Dimension(*rows[0]) if rows else None

    def list_accounts(
        self, dimension_slug: str | None, *, active_only: bool = False
    ) -> list[Account]:
        """The dimension's accounts; None: every dimension's, in one query."""
        rows = self._select(
            """SELECT a.id, a.dimension_id, a.platform, a.handle, a.daily_quota_units, a.active,
                      a.quota_timezone, a.daily_insert_calls, a.registered_as
                 FROM mdame.dimension_accounts a JOIN mdame.dimensions d ON d.id = a.dimension_id
                WHERE (d.slug = %s OR %s::text IS NULL) AND (a.active OR NOT %s) ORDER BY a.id""",
            [dimension_slug, dimension_slug, active_only],
        )
        return [Account(*row) for row in rows]
