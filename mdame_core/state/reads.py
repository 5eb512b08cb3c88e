"""Reads (SELECT only) of no one subject: the database's clock and ENV, and what the
orchestration layer (sensors, checks) and topic selection ask."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from mdame_core.state.client import ClientBase
from mdame_core.state.records import PartitionWork

# Until when script `s`'s unsettled upload waits: a submitted attempt's lease (another holder's
# answer may still come until then), or a gone session's second search (settle_after). Past
# times are kept while the upload is unsettled: a run that met the wait ended before it.
UPLOAD_WAIT = """
    SELECT max(CASE WHEN a.status = 'submitted' THEN a.lease_expires_at
                    WHEN a.status = 'unknown' THEN u.gone_settle_after END) AS until
      FROM mdame.publications p
      JOIN LATERAL (SELECT x.id, x.status, x.lease_expires_at FROM mdame.provider_attempts x
                     WHERE x.work_key = p.idempotency_key
                     ORDER BY x.attempt_no DESC LIMIT 1) a ON true
      LEFT JOIN mdame.upload_sessions u ON u.attempt_id = a.id
     WHERE p.script_id = s.id AND p.state = 'uploading'"""


class Reads(ClientBase):
    """Reads of no one subject."""

    def db_now(self) -> datetime:
        """The database's clock (leases and reconcile answers are judged by it)."""
        return self._select("SELECT now()")[0][0]

    def environment(self) -> str:
        return self._select("SELECT env FROM mdame.environment")[0][0]

    def covered_topic_titles(self, dimension_id: int, day: date, lookback_days: int) -> list[str]:
        """Titles of the dimension's approved or scripted topics on the other days within
        `lookback_days` of `day`, on either side: backfills run days out of order, so a later
        day that already covered a story counts as much as an earlier one."""
        rows = self._select(
            """SELECT payload->>'title' FROM mdame.topics
                WHERE dimension_id = %(dim)s AND state IN ('approved', 'scripted')
                  AND partition_date <> %(day)s::date
                  AND partition_date BETWEEN %(day)s::date - %(n)s AND %(day)s::date + %(n)s
                  AND payload ? 'title'
                ORDER BY partition_date, id""",
            {"dim": dimension_id, "day": day, "n": lookback_days},
        )
        return [r[0] for r in rows]

    def partitions_with_scripts_in(self, states: Sequence[str]) -> list[PartitionWork]:
        """(day, dimension) pairs with scripts in any of `states`, their newest update, and
        until when an upload of theirs waits (UPLOAD_WAIT)."""
        rows = self._select(
            f"""SELECT s.partition_date, d.slug, max(s.updated_at), count(*), max(w.until)
                  FROM mdame.scripts s JOIN mdame.dimensions d ON d.id = s.dimension_id
                  LEFT JOIN LATERAL ({UPLOAD_WAIT}) w ON true
                 WHERE s.state = ANY(%s) AND d.active
                 GROUP BY s.partition_date, d.slug ORDER BY s.partition_date, d.slug""",
            [list(states)],
        )
        return [PartitionWork(*row) for row in rows]

    def upload_wait(self, dimension_id: int, day: date) -> datetime | None:
        """Until when an upload of the partition's scripts waits (UPLOAD_WAIT), or None."""
        rows = self._select(
            f"""SELECT max(w.until) FROM mdame.scripts s LEFT JOIN LATERAL ({UPLOAD_WAIT}) w ON true
                 WHERE s.dimension_id = %s AND s.partition_date = %s""",
            [dimension_id, day],
        )
        return rows[0][0] if rows else None
