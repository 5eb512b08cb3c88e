"""Versioned parameter sets: a dimension's tuned parameters, one change a week at most under
its pipeline lock, and their rollback (the operator's)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from mdame_core.state.client import ClientBase, JsonObject, _json
from mdame_core.state.records import ParamSet


class ParamSets(ClientBase):
    """The parameter-set RPCs and reads."""

    def apply_param_set(
        self,
        dimension_slug: str,
        week_start: date,
        effective_from: date,
        params: JsonObject,
        changes: Sequence[JsonObject],
        explanation: str,
    ) -> tuple[int, bool]:
        """(version, created): a new version for the week, or the week's existing one when the
        same params are proposed again. Made under the dimension's lock (Fenced otherwise); the
        limits are the dimension's registered ones (its YAML's `adaptive:` block as last
        synced), never the caller's. InvalidInput for a value outside them, a move over the
        weekly step or an unknown parameter; StateConflict for a second change in a week or an
        engine the YAML disables; NotFound for a registration without limits."""
        rows = self.call(
            "apply_param_set",
            dimension_slug,
            week_start,
            effective_from,
            _json(params),
            _json(list(changes)),
            explanation,
            self._token(),
        )
        return int(rows[0][0]), bool(rows[0][1])

    def rollback_param_set(self, dimension_slug: str, reason: str) -> tuple[int, int]:
        """(rolled-back version, version now current; 0: the YAML's values). NotFound when the
        dimension is unknown or has no set left to roll back."""
        rows = self.call("rollback_param_set", dimension_slug, reason)
        return int(rows[0][0]), int(rows[0][1])

    _PARAM_COLUMNS = """d.slug, s.version, s.parent_version, s.week_start, s.effective_from,
        s.params, s.limits, s.changes, s.explanation, s.created_at, s.rolled_back_at,
        s.rollback_reason
        FROM mdame.param_sets s JOIN mdame.dimensions d ON d.id = s.dimension_id"""

    def param_sets(self, dimension_slug: str) -> list[ParamSet]:
        """Every version of the dimension's parameter set, oldest first (rolled back too)."""
        rows = self._select(
            f"SELECT {self._PARAM_COLUMNS} WHERE d.slug = %s ORDER BY s.version", [dimension_slug]
        )
        return [ParamSet(*row) for row in rows]

    def current_param_set(self, dimension_slug: str, day: date | None = None) -> ParamSet | None:
        """The set in force: the highest version not rolled back (None: the YAML's values).
        With `day`, the one a run of that day reads (effective_from <= day), so a day's re-runs
        read the same set."""
        rows = self._select(
            f"""SELECT {self._PARAM_COLUMNS}
                 WHERE d.slug = %s AND s.rolled_back_at IS NULL
                   AND (%s::date IS NULL OR s.effective_from <= %s::date)
                 ORDER BY s.version DESC LIMIT 1""",
            [dimension_slug, day, day],
        )
        return ParamSet(*rows[0]) if rows else None
