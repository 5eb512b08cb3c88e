"""Work units: created once per idempotency key, moved by checked transitions that log events;
their reads by kind."""

from __future__ import annotations

from typing import Any

from mdame_core.state.client import ClientBase, JsonObject, _json, _obj
from mdame_core.state.records import Event, WorkUnit

_SHARED_COLUMNS = (
    "id",
    "kind",
    "idempotency_key",
    "state",
    "payload",
    "result",
    "attempts",
    "created_at",
    "updated_at",
)


class WorkUnits(ClientBase):
    """The work-unit RPCs, and the reads of units and their events."""

    def upsert_work_unit(self, kind: str, idempotency_key: str, payload: JsonObject) -> int:
        """Creates the unit once per key (same key and payload: same id; other payload: raises)."""
        return self._scalar(
            "upsert_work_unit", kind, idempotency_key, _json(payload), self._token()
        )

    def transition(
        self,
        kind: str,
        unit_id: int,
        from_state: str,
        to_state: str,
        detail: JsonObject | None = None,
    ) -> int:
        """Checked move from_state -> to_state, detail merged into result; returns the event id."""
        return self._scalar(
            "transition", kind, unit_id, from_state, to_state, _obj(detail), self._token()
        )

    def bump_work_attempt(self, kind: str, unit_id: int, detail: JsonObject | None = None) -> int:
        return self._scalar("bump_work_attempt", kind, unit_id, _obj(detail), self._token())

    def get_work_unit(self, kind: str, key_or_id: int | str) -> WorkUnit | None:
        """By id (int) or idempotency key (str)."""
        column = "id" if isinstance(key_or_id, int) else "idempotency_key"
        units = self._work_units(kind, f"{column} = %s", [key_or_id], limit=1)
        return units[0] if units else None

    def list_work_units(self, kind: str, *, limit: int = 1000, **filters: Any) -> list[WorkUnit]:
        """Units of a kind filtered by equality on state or natural columns, oldest first."""
        table, refs = self._kind(kind)
        allowed = {"state", "idempotency_key", *refs}
        unknown = set(filters) - allowed
        if unknown:
            raise ValueError(f"cannot filter {kind} by {sorted(unknown)}; use {sorted(allowed)}")
        where = " AND ".join(f'"{name}" = %s' for name in filters) or "true"
        return self._work_units(kind, where, list(filters.values()), limit=limit)

    def _work_units(self, kind: str, where: str, args: list[Any], *, limit: int) -> list[WorkUnit]:
        table, refs = self._kind(kind)
        columns = ", ".join(f'"{c}"' for c in (*_SHARED_COLUMNS[:1], *_SHARED_COLUMNS[2:], *refs))
        rows = self._select(
            f'SELECT {columns} FROM mdame."{table}" WHERE {where} ORDER BY id LIMIT %s',
            [*args, limit],
        )
        units = []
        for row in rows:
            unit_id, key, state, payload, result, attempts, created_at, updated_at = row[:8]
            natural = dict(zip(refs, row[8:], strict=True))
            units.append(
                WorkUnit(
                    kind,
                    unit_id,
                    key,
                    state,
                    payload,
                    result,
                    attempts,
                    created_at,
                    updated_at,
                    natural,
                )  # fmt: skip
            )
        return units

    def _kind(self, kind: str) -> tuple[str, tuple[str, ...]]:
        """(table, natural columns) of a kind, read once from mdame.work_kinds and the catalog."""
        if kind not in self._kinds:
            rows = self._select(
                """SELECT k.table_name, array_agg(a.attname::text ORDER BY a.attnum)
                     FROM mdame.work_kinds k
                     JOIN pg_attribute a ON a.attrelid = format('mdame.%%I', k.table_name)::regclass
                    WHERE k.kind = %s AND a.attnum > 0 AND NOT a.attisdropped
                      AND a.attname::text <> ALL (%s)
                    GROUP BY k.table_name""",
                [kind, list(_SHARED_COLUMNS)],
            )
            if not rows:
                raise ValueError(f"unknown kind {kind!r}")
            self._kinds[kind] = (rows[0][0], tuple(rows[0][1]))
        return self._kinds[kind]

    def work_flow(self, kind: str, goal: str) -> tuple[str, ...]:
        """The kind's path through the stages: its initial state, then each state of the one
        shortest chain of allowed transitions to `goal` (a script's: drafted ... published).
        Read once from mdame.allowed_transitions, so the order the stages ask about ('is this
        script past X?') is the database's own."""
        if (kind, goal) not in self._flows:
            rows = self._select(
                """SELECT k.initial_state, t.from_state, t.to_state FROM mdame.work_kinds k
                     LEFT JOIN mdame.allowed_transitions t ON t.kind = k.kind
                    WHERE k.kind = %s""",
                [kind],
            )
            if not rows:
                raise ValueError(f"unknown kind {kind!r}")
            edges = [(r[1], r[2]) for r in rows if r[1] is not None]
            self._flows[(kind, goal)] = shortest_path(rows[0][0], goal, edges)
        return self._flows[(kind, goal)]

    def list_events(self, subject_kind: str, subject_id: int) -> list[Event]:
        rows = self._select(
            """SELECT id, subject_kind, subject_id, event, from_state, to_state, detail, created_at
                 FROM mdame.events WHERE subject_kind = %s AND subject_id = %s ORDER BY id""",
            [subject_kind, subject_id],
        )
        return [Event(*row) for row in rows]


def shortest_path(start: str, goal: str, edges: list[tuple[str, str]]) -> tuple[str, ...]:
    """The states from `start` to `goal` along the fewest edges; exactly one such path must
    exist, else the flow is ambiguous (or broken) and the error names the choice."""
    paths: dict[str, list[tuple[str, ...]]] = {start: [(start,)]}
    frontier = [start]
    while frontier and goal not in paths:
        reached: dict[str, list[tuple[str, ...]]] = {}
        for state in frontier:
            for source, target in edges:
                if source == state and target not in paths:
                    reached.setdefault(target, []).extend(p + (target,) for p in paths[state])
        paths.update(reached)
        frontier = sorted(reached)
    if goal not in paths:
        raise ValueError(f"no transitions lead from {start!r} to {goal!r}")
    if len(paths[goal]) > 1:
        raise ValueError(
            f"{len(paths[goal])} shortest paths lead from {start!r} to {goal!r}, e.g. "
            f"{' -> '.join(paths[goal][0])} and {' -> '.join(paths[goal][1])}: the stage order "
            "is ambiguous"
        )
    return paths[goal][0]
