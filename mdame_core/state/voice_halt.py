"""Voice HALT and its backoff retry."""

from __future__ import annotations

from datetime import date, datetime

from mdame_core.state.client import ClientBase
from mdame_core.state.records import PartitionWork, VoiceHalt


class VoiceHalts(ClientBase):
    """The voice-halt RPCs and reads."""

    def halt_voice(
        self,
        script_id: int,
        reason: str,
        *,
        permanent: bool,
        backoff_s: float,
        backoff_max_s: float,
        retry_until: datetime,
    ) -> datetime | None:
        """voice_queued -> halted with the reason and a 'voice_halted' event, together; the
        time its voice may be retried (backoff_s * 2^(halts-1), capped at backoff_max_s and at
        retry_until), or None when the script is failed instead: a permanent cause, or the
        retry window already closed."""
        return self._scalar(
            "halt_voice",
            script_id,
            reason,
            permanent,
            backoff_s,
            backoff_max_s,
            retry_until,
            self._token(),
        )

    def retry_halted_voice(self, script_id: int) -> str:
        """halted -> voice_queued once the backoff has expired (RetryNotDue before); 'failed'
        when the retry window closed meanwhile."""
        return self._scalar("retry_halted_voice", script_id, self._token())

    _VOICE_HALT_COLUMNS = """h.script_id, h.halts, h.max_halts, h.last_reason, h.halted_at,
                             h.next_retry_at, h.permanent, h.retry_until"""

    def get_voice_halt(self, script_id: int) -> VoiceHalt | None:
        rows = self._select(
            f"""SELECT {self._VOICE_HALT_COLUMNS}
                  FROM mdame.voice_halts h WHERE h.script_id = %s""",
            [script_id],
        )
        return VoiceHalt(*rows[0]) if rows else None

    def voice_retries_due(self, dimension_id: int, day: date) -> list[VoiceHalt]:
        """The partition's halted scripts whose voice backoff has expired (database clock)."""
        rows = self._select(
            f"""SELECT {self._VOICE_HALT_COLUMNS}
                  FROM mdame.voice_halts h JOIN mdame.scripts s ON s.id = h.script_id
                 WHERE s.dimension_id = %s AND s.partition_date = %s AND s.state = 'halted'
                   AND h.next_retry_at <= now()
                 ORDER BY h.script_id""",
            [dimension_id, day],
        )
        return [VoiceHalt(*row) for row in rows]

    def partitions_with_voice_retry_due(self) -> list[PartitionWork]:
        """Partitions with a halted script whose voice backoff has expired; last_update is
        the newest expiry, so each retry is a new request for the hop sensor."""
        rows = self._select(
            """SELECT s.partition_date, d.slug, max(h.next_retry_at), count(*)
                 FROM mdame.voice_halts h JOIN mdame.scripts s ON s.id = h.script_id
                 JOIN mdame.dimensions d ON d.id = s.dimension_id
                WHERE s.state = 'halted' AND h.next_retry_at <= now() AND d.active
                GROUP BY s.partition_date, d.slug ORDER BY s.partition_date, d.slug"""
        )
        return [PartitionWork(*row) for row in rows]
