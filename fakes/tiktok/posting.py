"""Direct Post on the TikTok fake: creator info, video init (the chunk plan), post status."""

from __future__ import annotations

import secrets
from typing import Any

from fakes.common import new_secret
from fakes.tiktok.auth import Auth
from fakes.tiktok.model import chunk_plan_problem, post_refusal
from fakes.tiktok.protocol import TITLE_MAX_UTF16, envelope


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class Posting(Auth):
    """Direct Post: the creator's info, a publish's init, and its status."""

    def creator_info(self, _query: dict[str, str]) -> None:
        self._body()
        caller = self._caller("video.publish")
        if caller is None:
            return
        open_id, token = caller
        if not self._allowed(open_id, token, "creator_info"):
            return
        if self._server_fault("creator_info_5xx"):
            return
        with self.fake.state.lock:
            c = self.fake.state.data["creators"][open_id]
            data = {
                "creator_avatar_url": f"{self.fake.base_url}avatar/{open_id}.jpeg",
                "creator_username": c["username"],
                "creator_nickname": c["nickname"],
                "privacy_level_options": list(c["privacy_options"]),
                "comment_disabled": False,
                "duet_disabled": c["private_account"],
                "stitch_disabled": c["private_account"],
                "max_video_post_duration_sec": c["max_video_post_duration_sec"],
            }
            refusal = post_refusal(self.fake, open_id)
        # The docs answer these two with HTTP 200, on purpose: the creator can't post now.
        code = refusal[0] if refusal else "ok"
        self._send(200, envelope(code, refusal[1] if refusal else "", data))

    # -- init ----------------------------------------------------------------------------
    def video_init(self, _query: dict[str, str]) -> None:
        raw = self._body()
        caller = self._caller("video.publish")
        if caller is None:
            return
        open_id, token = caller
        if not self._allowed(open_id, token, "init") or self._server_fault("init_5xx"):
            return
        body = self._json(raw)
        if body is None:
            return
        post_info, source = body.get("post_info"), body.get("source_info")
        if not isinstance(post_info, dict) or not isinstance(source, dict):
            self._api("invalid_params", "post_info and source_info are required.")
            return
        title = post_info.get("title") or ""
        if not isinstance(title, str) or _utf16_len(title) > TITLE_MAX_UTF16:
            self._api("invalid_params", "The title is invalid.")
            return
        fake, st = self.fake, self.fake.state
        with st.lock:
            creator = st.data["creators"][open_id]
            level = post_info.get("privacy_level")
            if level not in creator["privacy_options"]:
                self._api(
                    "privacy_level_option_mismatch",
                    "privacy_level is not specified or not among privacy_level_options.",
                )
                return
            if not creator["audited"] and (level != "SELF_ONLY" or not creator["private_account"]):
                self._api(
                    "unaudited_client_can_only_post_to_private_accounts",
                    "Unaudited clients can only post SELF_ONLY to a private account.",
                )
                return
            refusal = post_refusal(fake, open_id)
            if refusal is not None:
                self._api(*refusal)
                return
        if source.get("source") == "PULL_FROM_URL":
            self._api("url_ownership_unverified", "The URL's ownership is not verified.")
            return
        if source.get("source") != "FILE_UPLOAD":
            self._api("invalid_params", "source must be FILE_UPLOAD or PULL_FROM_URL.")
            return
        problem = chunk_plan_problem(fake, source)
        if problem is not None:
            self._api("invalid_params", problem)
            return
        publish_id = f"v_pub_file~v2-1.{7 * 10**18 + secrets.randbelow(10**18)}"
        upload_id, upload_token = secrets.token_hex(10), new_secret("", 12)
        with st.lock:
            creator["posts"].append(fake.clock())
            st.data["publishes"][publish_id] = {
                "publish_id": publish_id,
                "open_id": open_id,
                "upload_id": upload_id,
                "upload_token": upload_token,
                "video_size": int(source["video_size"]),
                "chunk_size": int(source["chunk_size"]),
                "total_chunk_count": int(source["total_chunk_count"]),
                "received": 0,
                "created": fake.clock(),
                "privacy_level": level,
                "post_info": post_info,
                "post_id": None,
                "fail_reason": None,
                "expired": False,
            }
            st.blob(publish_id).write_bytes(b"")
            st.save()
        url = f"{fake.base_url}upload/?upload_id={upload_id}&upload_token={upload_token}"
        self._api("ok", "", {"publish_id": publish_id, "upload_url": url})

    def status_fetch(self, _query: dict[str, str]) -> None:
        raw = self._body()
        caller = self._caller("video.publish", "video.upload")
        if caller is None:
            return
        open_id, token = caller
        if not self._allowed(open_id, token, "status") or self._server_fault("status_5xx"):
            return
        body = self._json(raw)
        if body is None:
            return
        fake, st = self.fake, self.fake.state
        with st.lock:
            pub = st.data["publishes"].get(str(body.get("publish_id", "")))
            if pub is None:
                self._api("invalid_publish_id", "The publish_id does not exist.")
                return
            if pub["open_id"] != open_id:
                self._api(
                    "token_not_authorized_for_specified_publish_id",
                    "The access_token may not read this publish_id.",
                )
                return
            fake.advance(pub)
            st.save()
            status = fake.status_of(pub)
            video = st.data["videos"].get(pub["post_id"] or "")
            public = video is not None and status == "PUBLISH_COMPLETE" and fake.public_now(video)
            data: dict[str, Any] = {
                "status": status,
                "publicaly_available_post_id": [int(video["id"])] if public and video else [],
                "uploaded_bytes": pub["received"],
            }
            if status == "FAILED":
                data["fail_reason"] = pub["fail_reason"]
        self._api("ok", "", data)
