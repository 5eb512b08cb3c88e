"""videos.insert on the YouTube fake: a resumable session's initiation, quota and faults."""

from __future__ import annotations

import json
import time

from fakes.common import Drop, new_secret
from fakes.youtube.plumbing import Plumbing
from fakes.youtube.protocol import api_error


class Upload(Plumbing):
    """videos.insert's resumable session: its initiation, counted against the quota."""

    def initiate(self, query: dict[str, str]) -> None:
        body = self._body()
        channel = self._channel("initiate")
        if channel is None:
            return  # 401: no channel to charge
        faults, st = self.fake.faults, self.fake.state
        try:
            resource = json.loads(body or b"{}")
        except ValueError:
            resource = None
        snippet = resource.get("snippet") if isinstance(resource, dict) else None
        description = snippet.get("description", "") if isinstance(snippet, dict) else ""
        with st.lock:
            fault = None
            if st.left(channel, "insert") > 0:
                fault = faults.take(
                    "initiate_5xx",
                    "quota_exceeded",
                    "upload_limit_exceeded",
                    "forbidden",
                    "invalid_title",
                    "initiate_then_drop",
                    "foreign_location",
                )
                counted = fault is None or fault["fault"] != "quota_exceeded"
            else:
                counted = False
            if counted:  # received: counted, whatever the answer
                st.charge(channel, "insert", 1)
            st.data["initiations"].append(
                {
                    "channel": channel,
                    "description": str(description),
                    "counted": counted,
                    "at": time.time(),
                }
            )
            st.save()
        if not counted:
            self._send(
                403,
                api_error(
                    403,
                    "quotaExceeded",
                    "The request cannot be completed because you have exceeded your quota.",
                    "youtube.quota",
                ),
            )
            return
        kind = fault["fault"] if fault is not None else None
        if query.get("uploadType") != "resumable":
            self._send(400, api_error(400, "badRequest", "only resumable uploads are served"))
            return
        if kind == "initiate_5xx":
            self._send(503, api_error(503, "backendError", "Backend Error", "global"))
            return
        if kind == "forbidden":
            message = "The request is not properly authorized to upload to this channel."
            self._send(403, api_error(403, "forbidden", message))
            return
        if kind == "invalid_title":
            self._send(
                400,
                api_error(
                    400, "invalidTitle", "The request metadata specifies an invalid video title."
                ),
            )
            return
        if kind == "upload_limit_exceeded":
            self._send(
                400,
                api_error(
                    400,
                    "uploadLimitExceeded",
                    "The user has exceeded the number of videos they may upload.",
                ),
            )
            return
        total = self.headers.get("X-Upload-Content-Length")
        if total is None or not total.isdigit():
            self._send(400, api_error(400, "badRequest", "X-Upload-Content-Length is required"))
            return
        upload_id = new_secret("", 16)
        with st.lock:
            st.data["sessions"][upload_id] = {
                "channel": channel,
                "part": query.get("part", ""),
                "notifySubscribers": query.get("notifySubscribers", "true"),
                "resource": resource if isinstance(resource, dict) else {},
                "content_type": self.headers.get("X-Upload-Content-Type", ""),
                "total": int(total),
                "received": 0,
                "puts": 0,
                "video_id": None,
                "gone": 404 if kind == "initiate_then_drop" else None,
                "created": time.time(),
                "stored_at": None,
            }
            st.blob(upload_id).write_bytes(b"")
            st.save()
        base = self.fake.base_url
        if kind == "foreign_location":
            base = str(fault.get("to") or "http://127.0.0.2:9/") if fault else base
        location = f"{base}upload/youtube/v3/videos?uploadType=resumable&upload_id={upload_id}"
        if kind == "initiate_then_drop" and fault is not None and not fault.get("answered", True):
            raise Drop(reset=False)
        self._send(200, None, {"Location": location, "X-GUploader-UploadID": upload_id})
