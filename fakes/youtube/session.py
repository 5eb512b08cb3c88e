"""A resumable upload session on the YouTube fake: its chunks, its status, its video."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from fakes.common import Drop
from fakes.youtube.plumbing import Plumbing
from fakes.youtube.protocol import api_error, video_resource


def _content_range(value: str) -> tuple[int | None, int | None]:
    """(first byte, total) of 'bytes a-b/N'; (None, N) for a status query 'bytes */N'."""
    unit, _, spec = value.partition(" ")
    if unit != "bytes" or "/" not in spec:
        return None, None
    span, _, total = spec.partition("/")
    size = int(total) if total.isdigit() else None
    if span == "*":
        return None, size
    return int(span.split("-")[0]), size


class Session(Plumbing):
    """A resumable session's PUTs: chunks, status queries, and the video they complete."""

    def put(self, query: dict[str, str]) -> None:
        st, faults = self.fake.state, self.fake.faults
        upload_id = query.get("upload_id", "")
        with st.lock:
            session = st.data["sessions"].get(upload_id)
            gone_now = session is not None and session["gone"] is None
            if gone_now and session is not None and faults.take("expire_session") is not None:
                session["gone"] = 404
                st.save()
        if session is None or session["gone"] is not None:
            self._body()
            status = 404 if session is None else int(session["gone"])
            self._send(status, api_error(status, "notFound", "upload session not found", "global"))
            return
        kind = "status" if "*" in self.headers.get("Content-Range", "") else "chunk"
        if self._channel_of_put(kind) is None:
            return  # refused for its token: nothing stored
        crange = self.headers.get("Content-Range", "")
        start, total = _content_range(crange)
        if total is not None and total != session["total"]:
            self._body()
            self._send(400, api_error(400, "badRequest", f"Content-Range {crange} != total"))
            return
        with st.lock:
            session["puts"] += 1
        if start is None:  # a status query
            self._body()
            self._answer(upload_id, session)
            return
        if session["video_id"] is not None:  # complete already: the same answer again
            self._body()
            self._answer(upload_id, session)
            return
        length = int(self.headers.get("Content-Length") or 0)
        fault = faults.take("reset_mid_chunk", "short_range", "slow_body") if length > 1 else None
        if fault is not None and fault["fault"] == "slow_body":
            self._slow_body(upload_id, session, start, length, float(fault.get("seconds", 5.0)))
            return
        if fault is not None:
            half = self._body(length // 2)
            self._store(upload_id, session, start, half)
            if fault["fault"] == "reset_mid_chunk":
                raise Drop(reset=True)
            self.rfile.read(length - len(half))  # read and ignore the rest
            self._answer(upload_id, session)
            return
        self._store(upload_id, session, start, self._body())
        self._answer(upload_id, session)

    def _channel_of_put(self, kind: str) -> str | None:
        """A session PUT's token checked (its body read first when refused)."""
        with self.fake.state.lock:
            known = self._bearer() in self.fake.state.data["tokens"]
        if not known:
            self._body()
        return self._channel(kind)

    def _slow_body(
        self, upload_id: str, session: dict[str, Any], start: int, length: int, pause: float
    ) -> None:
        """Half the body, a pause, the rest; stored once whole. A client that went away in the
        meantime leaves nothing (the bytes it had already queued may still arrive)."""
        try:
            data = self._body(length // 2)
            time.sleep(pause)
            data += self.rfile.read(length - len(data))
        except OSError:
            data = b""
        if len(data) < length:
            raise Drop(reset=False)
        self._store(upload_id, session, start, data)
        with contextlib.suppress(OSError):
            self._answer(upload_id, session)

    def _store(self, upload_id: str, session: dict[str, Any], start: int, data: bytes) -> None:
        """Appends what is new in `data` (a resend of bytes already held is ignored)."""
        st = self.fake.state
        with st.lock:
            have = session["received"]
            if start > have:
                return  # a gap: nothing stored, the Range tells the client where to go on
            new = data[have - start :]
            new = new[: session["total"] - have]
            if new:
                with st.blob(upload_id).open("ab") as f:
                    f.write(new)
                session["received"] = have + len(new)
                session["stored_at"] = time.time()
            if session["received"] == session["total"] and session["video_id"] is None:
                self._complete(upload_id, session)
            st.save()

    def _complete(self, upload_id: str, session: dict[str, Any]) -> None:
        st = self.fake.state
        channel = session["channel"]  # its insert was counted when the session was initiated
        video_id = secrets.token_urlsafe(8).replace("-", "a").replace("_", "b")[:11]
        raw = st.blob(upload_id).read_bytes()
        resource = session["resource"]
        late = self.fake.faults.take("late_listing")
        fault = self.fake.faults.take("processing_failed", "lost_response")
        processing = "succeeded"
        lost = False
        if fault is not None and fault["fault"] == "processing_failed":
            processing = "failed"
            lost = self.fake.faults.take("lost_response") is not None
        elif fault is not None:
            lost = True
        st.data["videos"][video_id] = {
            "id": video_id,
            "channel": channel,
            "upload_id": upload_id,
            "sha256": hashlib.sha256(raw).hexdigest(),
            "size": len(raw),
            "snippet": resource.get("snippet", {}),
            "status": {
                "uploadStatus": "processed" if processing == "succeeded" else "failed",
                **resource.get("status", {}),
            },
            "processing": processing,
            "published_at": datetime.now(UTC).isoformat(),
            "listed_from": time.time() + float(late.get("seconds", 5.0)) if late else 0.0,
        }
        st.data["channels"][channel]["videos"].insert(0, video_id)
        session["video_id"] = video_id
        session["lost"] = lost

    def _answer(self, upload_id: str, session: dict[str, Any]) -> None:
        if session["video_id"] is not None:
            if session.pop("lost", False):
                self.fake.state.save()
                raise Drop(reset=False)  # the video exists; its answer never arrives
            self._send(
                200,
                video_resource(
                    self.fake.state.data["videos"][session["video_id"]], "snippet,status"
                ),
            )
            return
        received = session["received"]
        headers = {"Range": f"bytes=0-{received - 1}"} if received else {}
        self._send(308, None, headers)
