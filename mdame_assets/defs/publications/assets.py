"""publications: each approved render published once per account, crash-safe.

The upload is an external side effect, so it follows Stripe-style recovery points: the
publication row moves pending -> uploading before the call, the attempt ledger records
'submitted' before it and the outcome after it, and a run that finds a publication still
'uploading' asks the channel what happened before it ever submits again.
"""

from pathlib import Path

import dagster as dg

from mdame_assets.defs.recovery.logic import reconcile_publication
from mdame_assets.defs.renders.assets import renders
from mdame_assets.lifecycle import scripts_entering
from mdame_assets.partitions import content_partitions
from mdame_assets.runtime import Step, pipeline_step
from mdame_assets.work import advance, create
from mdame_core.state import WorkUnit
from mdame_domain.idempotency import idempotency_key
from mdame_domain.media_store import sha256_file
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.publisher import PublisherResource
from mdame_resources.state import StateStoreResource


def _approved_file(
    step: Step, script: WorkUnit, media: MediaStoreResource
) -> tuple[WorkUnit, Path]:
    """The render to publish, refusing a file whose bytes are not the ones approved."""
    render = step.state.get_work_unit("render", script.result["render_id"])
    path = media.store().path_for(render.payload["uri"])
    actual = sha256_file(path) if path.exists() else "missing"
    if not step.state.is_approved(render.id, actual):
        raise dg.Failure(f"render {render.id}: file {path} ({actual[:12]}) is not the approved one")
    return render, path


def _upload(
    step: Step,
    pub: WorkUnit,
    publisher: PublisherResource,
    video: Path,
    render: WorkUnit,
    script: WorkUnit,
) -> WorkUnit:
    pub = advance(step.state, pub, "uploading")
    attempt_id = step.state.record_attempt(
        pub.idempotency_key, publisher.provider_name, render.payload["sha256"], "submitted"
    )
    metadata = {
        "title": script.payload["script"]["hook"],
        "description": script.payload["script"]["text"],
        "dimension": step.partition.dimension,
        "made_for_kids": step.dimension.made_for_kids,
        "synthetic_media": step.dimension.synthetic_media,
        "published_at": step.partition.as_of.isoformat(),
        "render_sha256": render.payload["sha256"],
    }
    try:
        video_id = publisher.publish(step.partition.dimension, pub.idempotency_key, video, metadata)
    except TimeoutError:
        # Sent but no answer: the outcome is unknown. Keep everything reserved; the next run
        # reconciles before any new submission.
        step.state.finish_attempt(attempt_id, "unknown")
        raise
    step.state.finish_attempt(attempt_id, "succeeded", {"video_id": video_id})
    return advance(step.state, pub, "published", {"video_id": video_id})


def _publish_script(
    step: Step, script: WorkUnit, publisher: PublisherResource, media: MediaStoreResource
) -> list[str]:
    render, video = _approved_file(step, script, media)
    video_ids, complete = [], True
    for account in step.state.list_accounts(step.partition.dimension):
        key = idempotency_key(
            script.idempotency_key, "publication", account.platform, account.handle
        )
        pub = create(
            step.state,
            "publication",
            key,
            {"script_id": script.id, "render_id": render.id, "account_id": account.id},
        )
        if pub.state != "published":
            if (
                step.state.reserve_quota(
                    account.id, step.partition.day, publisher.upload_quota_units, key
                )
                is None
            ):
                step.log("quota_exhausted", account=account.handle)  # nothing partial
                complete = False
                continue
            if pub.state == "uploading":
                pub = reconcile_publication(step.state, pub, publisher, step.partition.dimension)
            if pub.state == "pending":
                pub = _upload(step, pub, publisher, video, render, script)
        step.state.commit_quota(key)
        video_ids.append(pub.result["video_id"])
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
    publisher: PublisherResource,
    media: MediaStoreResource,
) -> dg.MaterializeResult:
    """Published videos: exactly one per script and account, whatever crashes in between."""
    with pipeline_step(context, state.get_client(), "publications") as step:
        published = {
            str(script.id): _publish_script(step, script, publisher, media)
            for script in scripts_entering(step, "rendered", "publishing")
        }
    return dg.MaterializeResult(metadata={"published_now": published})
