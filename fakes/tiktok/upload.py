"""The TikTok fake's upload_url: chunks in order, Content-Range checked, with faults."""

from __future__ import annotations

from fakes.common import Drop
from fakes.platform_common import trickle
from fakes.tiktok.plumbing import Plumbing
from fakes.tiktok.protocol import VIDEO_TYPES


def _content_range(value: str) -> tuple[int | None, int | None, int | None]:
    """(first, last, total) of 'bytes a-b/N'; Nones where it does not parse."""
    unit, _, spec = value.strip().partition(" ")
    span, _, total = spec.partition("/")
    first, _, last = span.partition("-")
    if unit != "bytes" or not (first.isdigit() and last.isdigit() and total.isdigit()):
        return None, None, None
    if int(last) < int(first):
        return None, None, None
    return int(first), int(last), int(total)


class Upload(Plumbing):
    """PUTs on a publish's upload_url: one chunk each, in order."""

    def upload(self, query: dict[str, str]) -> None:
        fake, st = self.fake, self.fake.state
        length = int(self.headers.get("Content-Length") or 0)
        with st.lock:
            pub = next(
                (
                    p
                    for p in st.data["publishes"].values()
                    if p["upload_id"] == query.get("upload_id")
                ),
                None,
            )
            if pub is not None and pub["upload_token"] == query.get("upload_token"):
                fake.advance(pub)
                if fake.faults.take("expire_publish") is not None and not pub["expired"]:
                    fake.expire_publish(pub["publish_id"])
            else:
                pub = None
        if pub is None or pub["expired"]:
            self._body()
            self._send(404 if pub is None else 403)
            return
        total, received = pub["video_size"], pub["received"]
        progress = {"Content-Range": f"bytes 0-{received}/{total}"}
        first, last, size = _content_range(self.headers.get("Content-Range", ""))
        if (
            size != total
            or first is None
            or last is None
            or last - first + 1 != length
            or self.headers.get("Content-Type", "").split(";")[0].strip() not in VIDEO_TYPES
        ):
            self._body()
            self._send(400, None, progress)
            return
        if first != received:  # not where the upload stands (a resend, a gap, or done)
            self._body()
            self._send(416, None, progress)
            return
        chunk, count = pub["chunk_size"], pub["total_chunk_count"]
        final = first // chunk >= count - 1
        if length != (total - (count - 1) * chunk if final else chunk):
            self._body()
            self._send(400, None, progress)
            return
        if self._server_fault_empty("chunk_5xx"):
            return
        dropped = fake.faults.take("drop_final_chunk") if final else None
        data = self.rfile.read(length)
        if len(data) != length:
            raise Drop()
        if dropped is not None and not dropped.get("stored", True):
            raise Drop()
        with st.lock:
            with st.blob(pub["publish_id"]).open("r+b") as f:
                f.seek(first)
                f.write(data)
            pub["received"] = received = first + length
            if received == total:
                fake.complete(pub)
            st.save()
        if dropped is not None:
            raise Drop()
        status, held = 201 if received == total else 206, f"bytes 0-{received}/{total}"
        slow = fake.faults.take("slow_answer")
        if slow is not None:
            trickle(self, status, [f"Content-Range: {held}"], b"", slow)
            return
        self._send(status, None, {"Content-Range": held})

    def _server_fault_empty(self, fault: str) -> bool:
        found = self.fake.faults.take(fault)
        if found is None:
            return False
        self._body()
        self._send(int(found.get("status", 500)))
        return True
