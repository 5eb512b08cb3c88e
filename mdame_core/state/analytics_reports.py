"""Analytics and weekly reports (0016; not fenced): the channels' daily counters, the Strategic
Auditor's facts and its stored reports."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from mdame_core.state.client import ClientBase, JsonObject, _json
from mdame_core.state.records import PublishedVideo, Report, VideoStat


class AnalyticsReports(ClientBase):
    """The analytics and report RPCs and reads."""

    def record_video_stats(self, day: date, items: Sequence[JsonObject]) -> int:
        """Upserts one day's counters, items [{"publication_id", "views", "likes",
        "comments"}] (<= 1000, each of a published publication); all or nothing. The count."""
        return self._scalar("record_video_stats", day, _json(list(items)))

    def store_report(
        self,
        dimension_slug: str,
        week_start: date,
        metrics: JsonObject,
        markdown: str,
        images: Sequence[JsonObject],
    ) -> int:
        """Stores (or replaces: revision + 1) the dimension's report of the week starting on
        `week_start` (a Monday). images: [{"name", "uri", "sha256"}]. The report id."""
        return self._scalar(
            "store_report",
            dimension_slug,
            week_start,
            _json(metrics),
            markdown,
            _json(list(images)),
        )

    def get_report(self, dimension_slug: str, week_start: date) -> Report | None:
        rows = self._select(
            """SELECT r.id, r.dimension_id, r.week_start, r.metrics, r.markdown, r.images,
                      r.revision, r.created_at, r.updated_at
                 FROM mdame.reports r JOIN mdame.dimensions d ON d.id = r.dimension_id
                WHERE d.slug = %s AND r.week_start = %s""",
            [dimension_slug, week_start],
        )
        return Report(*rows[0]) if rows else None

    def video_stats(self, dimension_id: int, first_day: date, last_day: date) -> list[VideoStat]:
        """The dimension's counters observed from first_day to last_day (inclusive)."""
        rows = self._select(
            """SELECT publication_id, day, dimension_id, video_id, views, likes, comments,
                      fetched_at
                 FROM mdame.video_stats
                WHERE dimension_id = %s AND day BETWEEN %s AND %s
                ORDER BY day, publication_id""",
            [dimension_id, first_day, last_day],
        )
        return [VideoStat(*row) for row in rows]

    def published_videos(self, dimension_id: int, last_day: date) -> list[PublishedVideo]:
        """The dimension's published videos made for partition days up to last_day."""
        rows = self._select(
            """SELECT p.id, s.dimension_id, p.account_id, a.platform, p.result ->> 'video_id',
                      coalesce((SELECT max(e.created_at) FROM mdame.events e
                                 WHERE e.subject_kind = 'publication' AND e.subject_id = p.id
                                   AND e.to_state = 'published'), p.updated_at),
                      s.partition_date,
                      coalesce(ARRAY(SELECT jsonb_array_elements_text(t.payload -> 'keywords')),
                               '{}')
                 FROM mdame.publications p
                 JOIN mdame.scripts s ON s.id = p.script_id
                 JOIN mdame.topics t ON t.id = s.topic_id
                 JOIN mdame.dimension_accounts a ON a.id = p.account_id
                WHERE s.dimension_id = %s AND p.state = 'published'
                  AND coalesce(p.result ->> 'video_id', '') <> '' AND s.partition_date <= %s
                ORDER BY p.id""",
            [dimension_id, last_day],
        )
        return [PublishedVideo(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(r[7])) for r in rows]

    def auditor_facts(self, dimension_id: int, first_day: date, last_day: date) -> dict[str, Any]:
        """The raw facts of one dimension's week (partition days first_day..last_day) that the
        Strategic Auditor's metrics are computed from (mdame_domain.audit), as plain values.
        Work is attributed to its partition day; spend and quota to the day they were used."""
        args = {"dim": dimension_id, "first": first_day, "last": last_day}
        week_scripts = """SELECT id FROM mdame.scripts
                           WHERE dimension_id = %(dim)s
                             AND partition_date BETWEEN %(first)s AND %(last)s"""
        facts: dict[str, Any] = {}
        facts["scripts"] = [
            {"id": r[0], "state": r[1], "hook_score": r[2]}
            for r in self._select(
                f"""SELECT id, state, (payload -> 'script' ->> 'hook_score')::float8
                      FROM mdame.scripts WHERE id IN ({week_scripts}) ORDER BY id""",
                args,
            )
        ]
        facts["transitions"] = [
            {"script_id": r[0], "from": r[1], "to": r[2], "at": r[3]}
            for r in self._select(
                f"""SELECT subject_id, from_state, to_state, created_at FROM mdame.events
                     WHERE subject_kind = 'script' AND to_state IS NOT NULL
                       AND subject_id IN ({week_scripts}) ORDER BY id""",
                args,
            )
        ]
        facts["topics"] = [
            {"state": r[0], "rejected_by": r[1]}
            for r in self._select(
                """SELECT state, result ->> 'rejected_by' FROM mdame.topics
                    WHERE dimension_id = %(dim)s
                      AND partition_date BETWEEN %(first)s AND %(last)s""",
                args,
            )
        ]
        facts["trends"] = self._select(
            """SELECT count(*) FROM mdame.trends WHERE dimension_id = %(dim)s
                 AND partition_date BETWEEN %(first)s AND %(last)s""",
            args,
        )[0][0]
        facts["safety"] = [
            {"verdict": r[0], "rule": r[1], "subject_kind": r[2]}
            for r in self._select(
                """SELECT verdict, rule, subject_kind FROM mdame.safety_audit_logs
                    WHERE dimension_id = %(dim)s AND verdict <> 'allow'
                      AND created_at >= %(first)s::date
                      AND created_at < %(last)s::date + 1""",
                args,
            )
        ]
        spent = self._select(
            """SELECT coalesce(sum(CASE state WHEN 'settled' THEN actual_micros
                                             WHEN 'reserved' THEN reserved_micros END), 0)
                 FROM mdame.budget_ledger l
                 JOIN mdame.dimensions d ON l.scope = 'dimension:' || d.slug
                WHERE d.id = %(dim)s AND l.period BETWEEN %(first)s::text AND %(last)s::text""",
            args,
        )
        facts["spent_micros"] = int(spent[0][0])
        facts["quota"] = {
            r[0]: int(r[1])
            for r in self._select(
                """SELECT l.bucket, sum(l.units) FROM mdame.quota_ledger l
                     JOIN mdame.dimension_accounts a ON a.id = l.account_id
                    WHERE a.dimension_id = %(dim)s AND l.state = 'committed'
                      AND l.day BETWEEN %(first)s AND %(last)s GROUP BY l.bucket""",
                args,
            )
        }
        facts["scenes"] = [
            {"state": r[0], "cached": r[1]}
            for r in self._select(
                f"""SELECT state, coalesce((result ->> 'cached')::boolean, false)
                      FROM mdame.scenes WHERE script_id IN ({week_scripts})""",
                args,
            )
        ]
        gpu = self._select(
            f"""SELECT coalesce(sum(extract(epoch FROM j.finished_at - j.started_at)), 0)
                  FROM mdame.jobs j JOIN mdame.scenes s ON s.id = (j.payload ->> 'scene_id')::bigint
                 WHERE s.script_id IN ({week_scripts}) AND j.state = 'succeeded'
                   AND j.started_at IS NOT NULL
                   AND NOT coalesce((j.result ->> 'cache_hit')::boolean, false)""",
            args,
        )
        facts["gpu_seconds"] = float(gpu[0][0])
        facts["videos"] = [
            {
                "publication_id": r[0],
                "published_on": r[1],
                "keywords": list(r[2]),
                "views": r[3],
                "likes": r[4],
            }
            for r in self._select(
                """SELECT p.id, t.partition_date,
                          coalesce(ARRAY(SELECT jsonb_array_elements_text(t.payload -> 'keywords')),
                                   '{}'),
                          last.views, last.likes
                     FROM mdame.publications p
                     JOIN mdame.scripts s ON s.id = p.script_id
                     JOIN mdame.topics t ON t.id = s.topic_id
                     LEFT JOIN LATERAL (
                          SELECT v.views, v.likes FROM mdame.video_stats v
                           WHERE v.publication_id = p.id AND v.day <= %(last)s
                           ORDER BY v.day DESC LIMIT 1) last ON true
                    WHERE s.dimension_id = %(dim)s AND p.state = 'published'
                      AND s.partition_date <= %(last)s
                    ORDER BY p.id""",
                args,
            )
        ]
        # Daily counters from a week before, so the report can draw the trend across weeks.
        facts["daily"] = [
            {"day": r[0], "publication_id": r[1], "views": int(r[2]), "likes": int(r[3])}
            for r in self._select(
                """SELECT day, publication_id, views, likes FROM mdame.video_stats
                    WHERE dimension_id = %(dim)s AND day BETWEEN %(first)s::date - 7 AND %(last)s
                    ORDER BY day, publication_id""",
                args,
            )
        ]
        return facts
