"""Analytics and weekly reports: the channels' daily counters and the stored reports (written
under the dimension's pipeline lock), the Strategic Auditor's facts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from mdame_core.state.client import ClientBase, JsonObject, _json
from mdame_core.state.records import PublishedVideo, Report, VideoStat


class AnalyticsReports(ClientBase):
    """The analytics and report RPCs and reads."""

    def record_video_stats(self, day: date, items: Sequence[JsonObject]) -> int:
        """Upserts one day's counters, items [{"publication_id", "views", "likes",
        "comments"}] (<= 1000, each of a published publication of the locked dimension); all
        or nothing. The count."""
        return self._scalar("record_video_stats", day, _json(list(items)), self._token())

    def store_report(
        self,
        dimension_slug: str,
        week_start: date,
        metrics: JsonObject,
        markdown: str,
        images: Sequence[JsonObject],
    ) -> int:
        """Stores (or replaces: revision + 1) the dimension's report of the week starting on
        `week_start` (a Monday), under its lock. images: [{"name", "uri", "sha256"}]. The
        report id."""
        return self._scalar(
            "store_report",
            dimension_slug,
            week_start,
            _json(metrics),
            markdown,
            _json(list(images)),
            self._token(),
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
        Strategic Auditor's metrics are computed from (mdame_domain.audit), as plain values
        (mdame.auditor_facts says which rows count)."""
        rows = self._select(
            "SELECT mdame.auditor_facts(%(dim)s, %(first)s, %(last)s)",
            {"dim": dimension_id, "first": first_day, "last": last_day},
        )
        facts: dict[str, Any] = rows[0][0]
        for transition in facts["transitions"]:
            transition["at"] = datetime.fromisoformat(transition["at"])
        for video in facts["videos"]:
            video["published_on"] = date.fromisoformat(video["published_on"])
        for counters in facts["daily"]:
            counters["day"] = date.fromisoformat(counters["day"])
        facts["gpu_seconds"] = float(facts["gpu_seconds"])
        return facts
