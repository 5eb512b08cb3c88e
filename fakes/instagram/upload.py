"""The Instagram fake's upload server (rupload): a container's bytes, resumable, with faults."""

from __future__ import annotations

import hashlib
import json
import time

from fakes.common import Drop
from fakes.instagram.protocol import VERSION_PATH, upload_error
from fakes.instagram.state import container_status
from fakes.instagram.tokens import Tokens
from fakes.platform_common import trickle


class Upload(Tokens):
    """The rupload host: a container's bytes, in one request or several."""

    def _upload(self, method: str, parts: list[str]) -> None:
        if parts and VERSION_PATH.match(parts[0]):
            parts = parts[1:]
        st, faults = self.fake.state, self.fake.faults
        if method != "POST" or len(parts) != 1:
            self._body()
            self._fail(400, upload_error("Unsupported upload request", "InvalidRequestError"))
        cid = parts[0]
        token = self.headers.get("Authorization", "")
        scheme, _, value = token.partition(" ")
        with st.lock:
            grant = st.data["tokens"].get(value.strip()) if scheme == "OAuth" else None
            c = st.data["containers"].get(cid)
            if grant is not None:
                self._expire_early(grant, "upload")
            valid = (
                grant is not None
                and grant["revoked"] is None
                and not grant.get("expired_early")
                and time.time() < grant["expires"]
            )
            if not valid:
                st.data["unauthorized"].append("upload")
            owner_ok = c is not None and grant is not None and c["account"] == grant["account"]
            status = container_status(c, time.time(), st.data["settings"]) if c else ""
        if c is None or not valid or not owner_ok:
            self._body()
            self._fail(400, upload_error("unauthorized user request"))
        if self.headers.get("file_url"):
            self._fail(
                400, upload_error(f"The media could not be fetched from {self.headers['file_url']}")
            )
        offset_h, size_h = self.headers.get("offset", ""), self.headers.get("file_size", "")
        if not offset_h.strip().isdigit():
            self._body()
            self._fail(
                400,
                upload_error(
                    "HeaderValuePredicate: Header Offset not convertable to unsigned long",
                    "ParameterValidationError",
                ),
            )
        if not size_h.strip().isdigit() or int(size_h) <= 0:
            self._body()
            self._fail(
                400,
                upload_error(
                    "HeaderValuePredicate: Header file_size not convertable to unsigned long",
                    "ParameterValidationError",
                ),
            )
        offset, total = int(offset_h), int(size_h)
        length = int(self.headers.get("Content-Length") or 0)
        if status in ("EXPIRED", "ERROR", "PUBLISHED"):
            self._body()
            self._fail(400, upload_error(f"The media container is {status.lower()}"))
        if c["file_size"] is not None and c["file_size"] != total:
            self._body()
            self._fail(
                400,
                upload_error(
                    f"file_size {total} differs from {c['file_size']} given before",
                    "ParameterValidationError",
                ),
            )
        if offset != c["received"]:
            self._body()
            self._fail(
                400,
                upload_error(
                    f"offset {offset} does not match the {c['received']} bytes received; "
                    "resume from video_status.uploading_phase.bytes_transferred"
                ),
            )
        final = offset + length >= total
        fault = faults.take("final_upload", "drop_upload") if final else None
        if fault is None:
            fault = faults.take("upload", "upload_5xx", "interrupt_upload")
        if fault is not None and fault["fault"] == "upload_5xx":
            self._body()
            self._fail(
                int(fault.get("status", 503)),
                upload_error("Service temporarily unavailable", "ServiceUnavailableError", True),
            )
        if fault is not None and fault["fault"] == "interrupt_upload":
            half = self._body(max(1, length // 2))
            self._store(cid, offset, total, half)
            raise Drop(reset=True)
        data = self._body()
        if offset + len(data) > total:
            self._fail(
                400,
                upload_error(
                    f"{offset + len(data)} bytes would exceed file_size {total}",
                    "ParameterValidationError",
                ),
            )
        if fault is not None:  # drop_upload: stored or not, the answer never comes
            if fault.get("stored", True):
                self._store(cid, offset, total, data)
            raise Drop(reset=bool(fault.get("reset", False)))
        self._store(cid, offset, total, data)
        if len(data) < length:  # the client went away mid-body; it gets nothing
            raise Drop(reset=False)
        slow = faults.take("upload", "slow_answer")
        if slow is not None:
            body = json.dumps({"success": True, "message": "Upload successful."}).encode()
            trickle(self, 200, ["Content-Type: application/json"], body, slow)
            return
        self._send(200, {"success": True, "message": "Upload successful."})

    def _store(self, cid: str, offset: int, total: int, data: bytes) -> None:
        st = self.fake.state
        with st.lock:
            c = st.data["containers"][cid]
            if offset != c["received"]:
                return  # a concurrent request got there first; its bytes stand
            c["file_size"] = total
            if data:
                with st.blob(cid).open("ab") as f:
                    f.write(data)
                c["received"] = offset + len(data)
            if c["received"] >= total and c["ready_at"] is None:
                now = time.time()
                c["ready_at"] = now + float(st.data["settings"]["processing_delay"])
                c["sha256"] = hashlib.sha256(st.blob(cid).read_bytes()).hexdigest()
                fault = self.fake.faults.take("processing", "container_error", "container_expired")
                if fault is not None:
                    expired = fault["fault"] == "container_expired"
                    c["forced"] = "EXPIRED" if expired else "ERROR"
                    c["forced_at"] = c["ready_at"]
                    c["error_subcode"] = None if expired else int(fault.get("subcode", 2207026))
            st.save()
