"""publications: each approved render published once per active account, crash-safe.

The upload is an external side effect, so it follows Stripe-style recovery points, each one RPC
(see PublisherResource): begin_bucket_upload (publication, quota reservation, attempt
'submitted' and publication 'uploading', together), the session committed before the first
byte, then finish_upload (outcome, publication state and quota, together). A run that finds an
upload whose outcome nobody recorded takes it over and asks the channel first, never submitting
again while an earlier submission may still land.
"""

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg

from mdame_assets.defs.renders.assets import renders
from mdame_assets.partition_runs import status_of
from mdame_assets.partitions import content_partitions
from mdame_core.state import Account, StateStore, WorkUnit
from mdame_domain.credits import Credit, footage_credits
from mdame_domain.dimensions import post_settings
from mdame_domain.idempotency import idempotency_key
from mdame_domain.media_store import MediaProblem, sha256_file
from mdame_domain.outbox import link_or_copy
from mdame_domain.partition_status import status_markdown
from mdame_domain.video_metadata import (
    INSTAGRAM_CAPTION,
    TIKTOK_CAPTION,
    VideoMetadata,
    publication_marker,
    video_resource,
)
from mdame_domain.waits import NotYet
from mdame_pipeline.recovery import in_flight
from mdame_pipeline.work import advance
from mdame_resources.alerts import raise_environment_alert
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.publisher import (
    AccountUnavailable,
    PublisherResource,
    UploadJob,
    publisher_for,
)
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import Step, pipeline_step, scripts_entering


@contextmanager
def _private_copy(media: MediaStoreResource, render: WorkUnit) -> Iterator[tuple[Path, str]]:
    """A private copy of the render and its SHA-256: the bytes hashed (and approved) are the
    bytes uploaded, whatever happens to the stored file meanwhile."""
    store = media.store()
    source = store.verified_path(render.payload["uri"], render.payload["sha256"])
    copy = media.scratch_dir("publish") / f"{render.payload['sha256']}.{render.id}.mp4"
    copy.unlink(missing_ok=True)  # a stopped attempt's copy: made again below
    try:
        # A hard link where it can (the outbox then links the same
        # bytes): the store replaces files or deletes them, never writes into them, so the
        # link keeps the hashed bytes; rot would change both, and the hash below sees it.
        link_or_copy(source, copy)
        sha256 = sha256_file(copy)
        if sha256 != render.payload["sha256"]:
            raise MediaProblem(f"render {render.id} changed while it was copied for upload")
        yield copy, sha256
    finally:
        copy.unlink(missing_ok=True)


def _thumbnail(media: MediaStoreResource, render: WorkUnit) -> Path | None:
    """The render's thumbnail JPEG, verified against its recorded hash; None when
    the render has none."""
    uri, sha256 = render.payload.get("thumbnail_uri"), render.payload.get("thumbnail_sha256")
    if not uri or not sha256:
        return None
    return media.store().verified_path(uri, sha256)


def _progress_into(
    uploads: dict[str, dict[str, int]] | None, name: str
) -> Callable[[int, int], None] | None:
    """A progress callback keeping the latest bytes confirmed per upload (run metadata)."""
    if uploads is None:
        return None

    def progress(sent: int, total: int) -> None:
        uploads[name] = {"sent_bytes": sent, "total_bytes": total}

    return progress


CAPTIONS = {"tiktok": TIKTOK_CAPTION, "instagram": INSTAGRAM_CAPTION}


def video_metadata(
    step: Step, script: WorkUnit, platform: str = "youtube", credits: tuple[Credit, ...] = ()
) -> VideoMetadata:
    """The video's metadata from the script and the dimension (validated before upload), with
    the platform's own hashtags, post settings and caption cap for a TikTok or Instagram
    account, and the footage's credits."""
    yt = step.dimension.youtube
    hashtags = yt.hashtags
    settings: tuple[tuple[str, Any], ...] = ()
    if platform in CAPTIONS:
        own = step.dimension.tiktok if platform == "tiktok" else step.dimension.instagram
        hashtags = yt.hashtags if own.hashtags is None else own.hashtags
        settings = post_settings(own)
    return VideoMetadata(
        title=script.payload["script"]["hook"],
        description=script.payload["script"]["text"],
        tags=tuple(step.dimension.keywords if yt.tags is None else yt.tags),
        category_id=yt.category_id,
        default_language=step.dimension.language,
        privacy_status=yt.privacy_status,
        self_declared_made_for_kids=step.dimension.made_for_kids,
        contains_synthetic_media=step.dimension.synthetic_media,
        notify_subscribers=yt.notify_subscribers,
        hashtags=hashtags,
        post_settings=settings,
        credits=credits,
        caption=CAPTIONS.get(platform),
    )


def script_credits(state: StateStore, script: WorkUnit) -> list[dict[str, str]]:
    """The credits of the footage the script's scenes show, in scene order (staged records)."""
    scenes = sorted(
        state.list_work_units("scene", script_id=script.id),
        key=lambda s: int(s.payload["scene_index"]),
    )
    return [credit.to_json() for credit in footage_credits(s.result for s in scenes)]


def staged_credits(
    state: StateStore, key: str, found: list[dict[str, str]]
) -> list[dict[str, str]]:
    """The credits a publication is published with: those its payload staged when it began
    (a rerun or a takeover publishes the same text, and passes the same payload), else those
    found now. A publication begun before credits were staged has none."""
    publication = state.get_work_unit("publication", key)
    if publication is None:
        return found
    return list(publication.payload.get("credits") or [])


def publish_resumable(
    state: StateStore,
    publisher: PublisherResource,
    key: str,
    payload: dict[str, Any],
    account: Account,
    video: Path,
    meta: VideoMetadata,
    *,
    required_reviews: list[str] | tuple[str, ...],
    checkpoint: Any,
    log: Any,
    dimension_slug: str,
    progress: Any = None,
    thumbnail: Path | None = None,
    settle_only: bool = False,
) -> str | None:
    """One publication: begin (or take over the unsettled upload), then the publisher's
    upload. The video id, or None when the account has no quota or may not be published to now
    (nothing half published). `settle_only`: only learn the outcome of an upload in flight,
    never starting or continuing one (None: not published). `state` is fenced."""
    marker = publication_marker(key)
    body = video_resource(meta, marker)  # refused before anything is reserved or sent
    for _ in range(3):
        start = state.begin_bucket_upload(
            key,
            payload,
            publisher.upload_quota_bucket,
            publisher.upload_quota_units,
            publisher.provider_name,
            required_reviews,
            publisher.upload_grace_s,
        )
        if start.action in ("no_quota", "skipped"):
            log(
                "quota_exhausted" if start.action == "no_quota" else "account_skipped",
                account_id=account.id,
            )
            if start.action == "no_quota":
                raise_environment_alert(
                    state,
                    dimension_slug,
                    "quota_exhausted",
                    f"account {account.handle}: no {publisher.upload_quota_bucket} quota left",
                )
            return None
        job = UploadJob(
            state=state,
            dimension_slug=dimension_slug,
            work_key=key,
            publication_id=start.publication_id,
            account=account,
            attempt_id=start.attempt_id if start.action == "submit" else None,
            video=video,
            sha256=payload["content_sha256"],
            body=body,
            notify_subscribers=meta.notify_subscribers,
            marker=marker,
            checkpoint=checkpoint,
            log=log,
            thumbnail=thumbnail,
            settle_only=settle_only,
        )
        if settle_only and start.action == "submit":
            raise RuntimeError(f"publication {key[:16]}: settle_only began a new upload")
        if progress is not None:
            job.progress = progress
        if start.action == "published":
            pub = state.get_work_unit("publication", start.publication_id)
            if pub is None:
                return None
            if "processing" not in pub.result:  # a crash came between upload and poll
                publisher.check_processing(job, str(pub.result["video_id"]))
            if thumbnail is not None and "thumbnail" not in pub.result:  # ... or thumbnail
                publisher.set_thumbnail(job, str(pub.result["video_id"]))
            return str(pub.result["video_id"])
        try:
            video_id = publisher.upload(job)
        except AccountUnavailable as exc:
            log("account_unavailable", account_id=account.id, reason=str(exc))
            return None
        if video_id is not None or settle_only:
            return video_id
    raise dg.Failure(f"publication {key[:16]} did not settle after three sessions")


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def retire_publication(
    state: StateStore,
    key: str,
    account: Account,
    publish: Callable[..., str | None],
    log: Callable[..., None],
) -> tuple[str | None, bool]:
    """An account that was deactivated gets no new publication; one it already has is
    settled: an upload in flight is taken over only to learn its outcome (published, or
    abandoned with nothing out), and what did not publish ends 'failed' with its quota
    released. `publish(settle_only=True)` is this publication's publish_resumable. Returns
    (video id or None, settled): not settled while the channel cannot be asked."""
    pub = state.get_work_unit("publication", key)
    if pub is None or pub.state == "failed":
        return None, True
    if pub.state == "published":
        return str(pub.result["video_id"]), True
    if in_flight(state, pub):
        if (video_id := publish(settle_only=True)) is not None:
            return video_id, True
        pub = state.get_work_unit("publication", key)
        if pub is None or in_flight(state, pub):
            return None, False
    state.retire_publication(pub.id, f"account {account.handle} was deactivated")
    log("publication_retired", account_id=account.id, publication_id=pub.id)
    return None, True


def publication_key(script: WorkUnit, account: Account) -> str:
    """The key of the script's publication on `account`, derived with the platform name the
    account was registered under (Account.key_platform): an account renamed since keeps its
    keys, so what it published is found published, never uploaded again."""
    return idempotency_key(
        script.idempotency_key, "publication", account.key_platform, account.handle
    )


def _publish_script(
    step: Step,
    script: WorkUnit,
    publishers: Mapping[str, PublisherResource],
    media: MediaStoreResource,
    uploads: dict[str, dict[str, int]] | None = None,
    waits: dict[str, str] | None = None,
) -> list[str]:
    """`publishers`: each platform's publisher, keyed by platform (see publisher_for)."""
    render = step.state.get_work_unit("render", script.result["render_id"])
    if render is None:
        raise dg.Failure(f"script {script.id} names render {script.result['render_id']}")
    video_ids, complete = [], True
    thumbnail = _thumbnail(media, render)
    found = script_credits(step.state, script)
    with _private_copy(media, render) as (video, sha256):
        for account in step.state.list_accounts(step.partition.dimension):
            key = publication_key(script, account)
            credits = staged_credits(step.state, key, found)
            payload: dict[str, Any] = {
                "script_id": script.id,
                "render_id": render.id,
                "account_id": account.id,
                "content_sha256": sha256,
            }
            if credits:
                payload["credits"] = credits
            staged = tuple(c for c in map(Credit.from_provenance, credits) if c is not None)
            publish = partial(
                publish_resumable,
                step.state,
                publisher_for(account.platform, publishers),
                key,
                payload,
                account,
                video,
                video_metadata(step, script, account.platform, staged),
                required_reviews=step.dimension.required_reviews,
                checkpoint=step.checkpoint,
                log=step.log,
                dimension_slug=step.partition.dimension,
                progress=_progress_into(uploads, f"{script.id}:{account.handle}"),
                thumbnail=thumbnail,
            )
            try:
                if account.active:
                    video_id, settled = publish(), True
                else:
                    video_id, settled = retire_publication(
                        step.state, key, account, publish, step.log
                    )
            except NotYet as wait:
                # Not a failure: the other accounts go on, and the hop sensor requests the
                # partition again once the wait is over (hops.hop_decision).
                step.log("upload_waits", account_id=account.id, until=_iso(wait.until))
                if waits is not None:
                    waits[f"{script.id}:{account.handle}"] = str(wait)
                video_id, settled = None, False
            complete = complete and settled and (video_id is not None or not account.active)
            if video_id is not None:
                video_ids.append(video_id)
    if complete:
        advance(step.state, script, "published", {"video_ids": video_ids})
    return video_ids


@dg.asset(
    partitions_def=content_partitions,
    group_name="publishing",
    deps=[renders],
    kinds={"youtube"},
)
def publications(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    youtube_publisher: PublisherResource,
    tiktok_publisher: PublisherResource,
    instagram_publisher: PublisherResource,
    media: MediaStoreResource,
) -> dg.MaterializeResult:
    """Published videos: exactly one per script and active account, whatever crashes between.
    An account's go through its platform's publisher (`youtube_publisher`, `tiktok_publisher`,
    `instagram_publisher`; the outbox stands in for each offline); one platform failing never
    holds the others back."""
    uploads: dict[str, dict[str, int]] = {}
    waits: dict[str, str] = {}
    publishers = {
        "youtube": youtube_publisher,
        "tiktok": tiktok_publisher,
        "instagram": instagram_publisher,
    }
    with pipeline_step(context, state.get_client(), "publications") as step:
        published = {
            str(script.id): _publish_script(step, script, publishers, media, uploads, waits)
            for script in scripts_entering(step, "rendered", "publishing")
        }
    metadata: dict[str, Any] = {"published_now": published}
    if uploads:
        metadata["uploads"] = uploads  # bytes the channel confirmed, per script:account
    if waits:
        metadata["waiting"] = waits  # per script:account, what it waits for and until when
    # The partition's status, as `mdame status` prints it, on its latest materialization (read
    # after the step let go of the dimension's lock, which would read as a wait otherwise).
    status = status_of(context.instance, state.get_client(), context.partition_key)
    metadata["status"] = dg.MetadataValue.md(status_markdown(status))
    return dg.MaterializeResult(metadata=metadata)
