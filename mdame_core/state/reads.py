"""Reads (SELECT only) of no one subject: the database's clock and ENV, and what the
orchestration layer (sensors, checks) and topic selection ask."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from mdame_core.state.client import ClientBase
from mdame_core.state.records import PartitionWork

# Until when script `s`'s work waits: its unsettled upload's submitted attempt's lease (another
# holder's answer may still come until then) or gone session's second search (settle_after),
# kept once past while the upload is unsettled (a run that met the wait ended before it); or,
# while it is ahead, the lease of a Gemini call of its dimension that a killed run submitted
# (its voice waits for it; paid calls name no script, and one run per dimension runs at a time).
WORK_WAIT = """
    SELECT
      (SELECT max(CASE WHEN a.status = 'submitted' THEN a.lease_expires_at
                       WHEN a.status = 'unknown' THEN u.gone_settle_after END)
         FROM mdame.publications p
         JOIN LATERAL (SELECT x.id, x.status, x.lease_expires_at FROM mdame.provider_attempts x
                        WHERE x.work_key = p.idempotency_key
                        ORDER BY x.attempt_no DESC LIMIT 1) a ON true
         LEFT JOIN mdame.upload_sessions u ON u.attempt_id = a.id
        WHERE p.script_id = s.id AND p.state = 'uploading') AS upload_until,
      (SELECT max(x.lease_expires_at) FROM mdame.provider_attempts x
        WHERE x.status = 'submitted' AND x.lease_expires_at > now() AND x.provider LIKE 'gemini:%%'
          AND x.detail ->> 'dimension' = (SELECT slug FROM mdame.dimensions
                                           WHERE id = s.dimension_id)) AS call_until,
      (SELECT max(j.run_after) FROM mdame.scenes sc
         JOIN mdame.job_keys k ON k.idempotency_key = coalesce(sc.result ->> 'job_key',
                                                               sc.idempotency_key)
         JOIN mdame.jobs j ON j.id = k.job_id
        WHERE s.state = 'planned' AND sc.script_id = s.id AND j.state = 'queued'
          AND j.run_after > now()) AS scene_until"""


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
        until when an upload of theirs waits (WORK_WAIT)."""
        rows = self._select(
            f"""SELECT s.partition_date, d.slug, max(s.updated_at), count(*),
                       greatest(max(w.upload_until), max(w.call_until), max(w.scene_until))
                  FROM mdame.scripts s JOIN mdame.dimensions d ON d.id = s.dimension_id
                  LEFT JOIN LATERAL ({WORK_WAIT}) w ON true
                 WHERE s.state = ANY(%s) AND d.active
                 GROUP BY s.partition_date, d.slug ORDER BY s.partition_date, d.slug""",
            [list(states)],
        )
        return [PartitionWork(*row) for row in rows]

    def partition_wait(self, dimension_id: int, day: date) -> tuple[datetime | None, str]:
        """Until when the partition's work waits (WORK_WAIT; the latest wait) and for what, in a
        user's words:
        (None, '') when nothing does."""
        rows = self._select(
            f"""SELECT max(w.upload_until), max(w.call_until), max(w.scene_until)
                  FROM mdame.scripts s LEFT JOIN LATERAL ({WORK_WAIT}) w ON true
                 WHERE s.dimension_id = %s AND s.partition_date = %s""",
            [dimension_id, day],
        )
        upload, call, scene = rows[0] if rows else (None, None, None)
        waits = [
            (until, what)
            for until, what in (
                (upload, "an interrupted upload"),
                (call, "an interrupted Gemini call"),
                (scene, "a scene's picture (a provider's rate limit or outage, or the budget)"),
            )
            if until is not None
        ]
        if not waits:
            return None, ""
        return max(waits, key=lambda item: item[0])

    # What `mdame status` and `make demo`'s summary read of one partition (mdame_pipeline.
    # partition_facts shapes them); the app role may SELECT every column named here.
    def partition_publications(
        self, dimension_id: int, day: date
    ) -> list[tuple[str, str, str, bool, bool, datetime | None, datetime]]:
        """Per publication of the partition's scripts: (its state, its script's state, the
        account's handle, active, needs_reauth, paused_until while it is ahead, and when the
        account's current quota day ends in its quota time zone)."""
        return self._select(
            """SELECT p.state, s.state, a.handle, a.active, a.needs_reauth,
                      CASE WHEN a.paused_until > now() THEN a.paused_until END,
                      ((now() AT TIME ZONE a.quota_timezone)::date + 1)::timestamp
                        AT TIME ZONE a.quota_timezone
                 FROM mdame.publications p
                 JOIN mdame.scripts s ON s.id = p.script_id
                 JOIN mdame.dimension_accounts a ON a.id = p.account_id
                WHERE s.dimension_id = %s AND s.partition_date = %s
                ORDER BY p.id""",
            [dimension_id, day],
        )

    def partition_trends_and_budget(
        self, dimension_id: int, day: date
    ) -> tuple[int, bool, datetime]:
        """(the partition's trends, whether the dimension's daily budget cap refused a paid call
        today (UTC), when today's budget period ends)."""
        [(trends, refused, resets)] = self._select(
            """SELECT (SELECT count(*) FROM mdame.trends
                        WHERE dimension_id = %(dim)s AND partition_date = %(day)s),
                      EXISTS (SELECT FROM mdame.events
                               WHERE subject_kind = 'dimension' AND subject_id = %(dim)s
                                 AND event = 'budget_exhausted'
                                 AND detail ->> 'period' = to_char(
                                       (now() AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD')),
                      ((now() AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC'""",
            {"dim": dimension_id, "day": day},
        )
        return int(trends), bool(refused), resets

    def partition_voice_halts(
        self, dimension_id: int, day: date
    ) -> list[tuple[str, datetime | None]]:
        """Each halted (or halt-failed) script's last reason and when its voice is retried."""
        return self._select(
            """SELECT h.last_reason, h.next_retry_at FROM mdame.voice_halts h
                 JOIN mdame.scripts s ON s.id = h.script_id
                WHERE s.dimension_id = %s AND s.partition_date = %s
                  AND s.state IN ('halted', 'failed') ORDER BY s.id""",
            [dimension_id, day],
        )

    def recent_alerts(
        self, dimension_slug: str, hours: int
    ) -> list[tuple[str, date, str, int, datetime]]:
        """The dimension's alerts, and those of no dimension, seen in the last `hours`, newest
        first: (cause, day, text, occurrences, last_seen_at)."""
        return self._select(
            """SELECT cause, day, text, occurrences, last_seen_at FROM mdame.alerts
                WHERE dimension_slug IN (%s, '')
                  AND last_seen_at > now() - make_interval(hours => %s)
                ORDER BY last_seen_at DESC, id DESC""",
            [dimension_slug, hours],
        )
