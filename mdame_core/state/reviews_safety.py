"""Reviews and safety: a render's reviews (also bound to file, request and acceptance),
whether it is approved, and the safety decisions log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mdame_core.state.client import ClientBase, JsonObject, _json, _obj


class ReviewsSafety(ClientBase):
    """The review and safety RPCs and reads."""

    def record_review(
        self,
        render_id: int,
        content_sha256: str,
        check_name: str,
        verdict: str,
        detail: JsonObject | None = None,
    ) -> int:
        return self._scalar(
            "record_review",
            render_id,
            content_sha256,
            check_name,
            verdict,
            _obj(detail),
            self._token(),
        )

    def is_approved(
        self, render_id: int, content_sha256: str, required_checks: Sequence[str] | None
    ) -> bool:
        """True when every required check (and every check recorded) approved exactly this
        file, and no later review is of another file."""
        checks = None if required_checks is None else list(required_checks)
        return self._scalar("is_approved", render_id, content_sha256, checks)

    def log_safety_decision(
        self,
        subject_kind: str,
        subject_key: str,
        dimension_slug: str | None,
        verdict: str,
        rule: str,
        reasons: Sequence[Any],
        classifier: str,
    ) -> int:
        return self._scalar(
            "log_safety_decision",
            subject_kind,
            subject_key,
            dimension_slug,
            verdict,
            rule,
            _json(list(reasons)),
            classifier,
            self._token(),
        )

    def record_bound_review(
        self,
        render_id: int,
        content_sha256: str,
        check_name: str,
        verdict: str,
        detail: JsonObject | None,
        request_sha256: str,
        acceptance: JsonObject,
    ) -> int:
        return self._scalar(
            "record_bound_review",
            render_id,
            content_sha256,
            check_name,
            verdict,
            _obj(detail),
            request_sha256,
            _json(acceptance),
            self._token(),
        )

    def reviews_of(self, render_id: int) -> list[dict[str, Any]]:
        """Every review of a render, oldest first."""
        rows = self._select(
            """SELECT id, content_sha256, check_name, verdict, detail, request_sha256, acceptance
                 FROM mdame.reviews WHERE render_id = %s ORDER BY id""",
            [render_id],
        )
        names = ("id", "content_sha256", "check_name", "verdict", "detail", "request_sha256")
        return [dict(zip((*names, "acceptance"), row, strict=True)) for row in rows]

    def last_safety_verdict(self, subject_kind: str, subject_key: str) -> str | None:
        rows = self._select(
            """SELECT verdict FROM mdame.safety_audit_logs
                WHERE subject_kind = %s AND subject_key = %s ORDER BY id DESC LIMIT 1""",
            [subject_kind, subject_key],
        )
        return rows[0][0] if rows else None
