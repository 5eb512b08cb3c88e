"""Media containers on the Instagram fake: their creation and their status."""

from __future__ import annotations

import re
import time
from typing import Any

from fakes.instagram.protocol import (
    CAPTION_MAX,
    CONTAINER_FIELDS,
    MENTIONS_MAX,
    ig_error,
    no_object,
    server_error,
)
from fakes.instagram.state import container_status
from fakes.instagram.tokens import Tokens

STATUS_TEXT = {
    "IN_PROGRESS": "In Progress: Media is still being processed.",
    "FINISHED": "Finished: Media has been uploaded and it is ready to be published.",
    "PUBLISHED": "Published: Media has been successfully published.",
    "EXPIRED": "Expired: Media was not published within 24 hours.",
}


class Containers(Tokens):
    """Reels containers: created for a resumable upload, and their status."""

    def create_container(self, account: str, parts: list[str], params: dict, version: str) -> None:
        self._owned_account(account, parts[0])
        fault = self.fake.faults.take("create", "create_5xx")
        if fault is not None:
            self._fail(int(fault.get("status", 500)), server_error())
        media_type = params.get("media_type", "")
        if media_type != "REELS":
            self._fail(400, ig_error("unknown_media_type", media_type=media_type or "(none)"))
        caption = params.get("caption", "")
        if len(caption) > CAPTION_MAX:
            self._fail(400, ig_error("caption_too_long", length=len(caption), most=CAPTION_MAX))
        if len(re.findall(r"@\w", caption)) > MENTIONS_MAX:
            self._fail(400, ig_error("too_many_tags", most=MENTIONS_MAX))
        if params.get("upload_type") != "resumable":  # a video_url this fake cannot fetch
            self._fail(400, ig_error("fetch_failed", uri=params.get("video_url") or "(none)"))
        st = self.fake.state
        with st.lock:
            cid = st.new_id("179", 14)
            kept = {k: v for k, v in params.items() if k != "access_token"}
            st.data["containers"][cid] = {
                "id": cid,
                "account": account,
                "params": kept,
                "version": version,
                "created": time.time(),
                "file_size": None,
                "received": 0,
                "ready_at": None,
                "forced": None,
                "error_subcode": None,
                "media_id": None,
                "sha256": None,
            }
            st.blob(cid).write_bytes(b"")
            st.save()
        uri = f"{self.fake.base_url}ig-api-upload/{version}/{cid}"
        self._send(200, {"id": cid, "uri": uri})

    def container(self, account: str, parts: list[str], params: dict, version: str) -> None:
        st = self.fake.state
        with st.lock:
            c = dict(st.data["containers"][parts[0]])
        if c["account"] != account:
            self._fail(400, no_object(self.command, parts[0]))
        if self.fake.faults.take("status", "status_5xx") is not None:
            self._fail(500, server_error())
        wanted = self._fields(params, CONTAINER_FIELDS, "ShadowIGMediaBuilder")
        with st.lock:
            code = container_status(c, time.time(), st.data["settings"])
        values: dict[str, Any] = {"id": c["id"], "status_code": code}
        if code == "ERROR":
            values["status"] = (
                f"Error: Media upload has failed with error code {c.get('error_subcode')}"
            )
        else:
            values["status"] = STATUS_TEXT[code]
        total, received = c["file_size"], c["received"]
        uploading = "not_started"
        if total is not None and received >= total:
            uploading = "complete"
        elif received or total is not None:
            uploading = "in_progress"
        processing = {
            "IN_PROGRESS": "in_progress" if uploading == "complete" else "not_started",
            "ERROR": "error",
            "EXPIRED": "complete" if uploading == "complete" else "not_started",
        }.get(code, "complete")
        values["video_status"] = {
            "uploading_phase": {"status": uploading, "bytes_transferred": received},
            "processing_phase": {"status": processing},
        }
        copyright_state = "complete" if processing == "complete" else "not_started"
        values["copyright_check_status"] = {"status": copyright_state, "matches_found": False}
        self._send(200, {k: values[k] for k in [*wanted, "id"]})
