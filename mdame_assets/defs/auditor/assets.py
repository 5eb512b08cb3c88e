"""strategic_audit: the weekly report of each dimension, delivered three ways.

Partitioned week x dimension (weeks Monday to Sunday, keyed by their Monday), like the content
stages' day x dimension: one dimension's report re-runs alone, a backfill covers a range of
weeks for one dimension, the UI shows the dimension axis, and the Adaptive Engine (a weekly
asset downstream) tunes one dimension from that dimension's report.

Per run: the week's facts are read from PostgreSQL (StateStore.auditor_facts), the metrics
computed (mdame_domain.audit), three PNG plots drawn (mdame_domain.report_plots), the PNGs put in
the media store and the report stored (store_report under the dimension's pipeline lock: a
re-run replaces it) with the contact sheets of the week's published videos (already in the media
store, named by their renders), then delivered:
Dagster metadata (the Markdown with the plots and sheets inline as data URIs, which the UI
renders; sheets past SHEETS_INLINE_MAX_BYTES in all are named by their path) and Telegram
(sendMessage in pieces of <= 4,096 characters, one sendPhoto per plot with a caption of
<= 1,024) through the notifier resource.
"""

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import dagster as dg

from mdame_assets.partitions import days_of_week, week_of, weekly_dimension_partitions
from mdame_core.settings import mdame_home
from mdame_core.state import StateStore
from mdame_domain.audit import (
    Week,
    report_markdown,
    split_message,
    week_contact_sheets,
    weekly_metrics,
)
from mdame_domain.dimensions import dimension_from_json
from mdame_domain.media_store import MediaProblem, MediaStore
from mdame_domain.report_plots import Plot, render_plots
from mdame_domain.retention import disk_usage_by_kind
from mdame_pipeline.locks import held_lock
from mdame_resources.media import MediaStoreResource
from mdame_resources.notify import NotifierResource
from mdame_resources.state import StateStoreResource

AUDITOR_GROUP = "operations"
TELEGRAM_TEXT_LIMIT = 4096
TELEGRAM_CAPTION_LIMIT = 1024
# The most contact-sheet bytes inlined in the report's metadata (Dagster keeps every event's).
SHEETS_INLINE_MAX_BYTES = 512 * 1024


class Notifier(Protocol):
    """What delivery needs of a notifier (mdame_resources.notify.NotifierResource)."""

    def send_message(self, dimension: str | None, text: str) -> None: ...

    def send_photo(self, dimension: str | None, png: bytes, caption: str) -> None: ...


def disk_bytes(home: Path) -> dict[str, int]:
    """Disk use per kind of media under the home."""
    return {str(kind): int(n) for kind, n in disk_usage_by_kind(home).items()}


def telegram_text(markdown: str) -> str:
    """The report for a chat: the Markdown without its image lines (the plots are sent as
    photos; the contact sheets stay in the stored report and the UI)."""
    lines = [line for line in markdown.splitlines() if not line.startswith("![")]
    while lines and lines[-1] in ("", "## Plots"):
        lines.pop()
    return "\n".join(lines)


def deliver_to_telegram(
    notifier: Notifier, dimension: str, markdown: str, plots: Sequence[Plot]
) -> dict[str, int]:
    """The text in messages of <= 4,096 characters, then one photo per plot (caption <= 1,024).
    The notifier retries a 429 after its retry_after; anything else it raises."""
    pieces = split_message(telegram_text(markdown), TELEGRAM_TEXT_LIMIT)
    for piece in pieces:
        notifier.send_message(dimension, piece)
    for plot in plots:
        notifier.send_photo(dimension, plot.png, plot.caption[:TELEGRAM_CAPTION_LIMIT])
    return {"messages": len(pieces), "photos": len(plots)}


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_report(
    client: StateStore, dimension_slug: str, week: Week, home: Path
) -> tuple[dict[str, Any], list[Plot], list[dict[str, str]]]:
    """The week's metrics, plots and contact sheets (audit.week_contact_sheets) for one
    dimension."""
    row = client.get_dimension(dimension_slug)
    if row is None:
        raise dg.Failure(
            f"dimension {dimension_slug!r} is not in the registry", allow_retries=False
        )
    config = dimension_from_json(row.config)
    facts = client.auditor_facts(row.id, week.start, week.end)
    metrics = weekly_metrics(
        facts,
        week,
        budget_usd_per_day=config.daily_budget_micros / 1_000_000,
        hook_threshold=config.hook_threshold,
        disk_bytes=disk_bytes(home),
    )
    return metrics, render_plots(dimension_slug, metrics), week_contact_sheets(facts, week)


def _sheet_targets(store: MediaStore, sheets: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(caption, target) per sheet for the metadata copy: a data URI while the inlined bytes
    stay under SHEETS_INLINE_MAX_BYTES, else the sheet's path; a sheet no longer stored is
    left out."""
    targets, inlined = [], 0
    for sheet in sheets:
        try:
            jpeg = store.verified_path(sheet["uri"], sheet["sha256"]).read_bytes()
        except MediaProblem:
            continue  # collected with its render since: the stored report still names it
        if inlined + len(jpeg) <= SHEETS_INLINE_MAX_BYTES:
            inlined += len(jpeg)
            target = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
        else:
            target = store.location(sheet["uri"])
        targets.append((sheet["caption"], target))
    return targets


@dg.asset(
    partitions_def=weekly_dimension_partitions,
    group_name=AUDITOR_GROUP,
    deps=[dg.AssetDep("video_stats", partition_mapping=days_of_week)],
    kinds={"postgres", "telegram"},
    description="The Strategic Auditor's weekly report per dimension: metrics, Markdown, "
    "plots and the week's videos' contact sheets, stored in mdame.reports and sent to Telegram.",
)
def strategic_audit(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    media: MediaStoreResource,
    notifier: NotifierResource,
) -> dg.MaterializeResult:
    week_start, dimension = week_of(context)
    week = Week(week_start)
    client = state.get_client()
    metrics, plots, sheets = build_report(client, dimension, week, mdame_home())

    store = media.store()
    scratch = media.scratch_dir("auditor")
    images = []
    for plot in plots:
        path = scratch / f"{dimension}-{week.start.isoformat()}-{plot.name}"
        path.write_bytes(plot.png)
        stored = store.put_file(path, ".png")
        path.unlink(missing_ok=True)
        images.append({"name": plot.name, "uri": stored.uri, "sha256": stored.sha256})
    # The sheets are stored already (with their renders): the report names them.
    images += [{k: sheet[k] for k in ("name", "uri", "sha256")} for sheet in sheets]
    # The stored Markdown points at the media store; the metadata copy carries the images.
    stored_md = report_markdown(
        dimension,
        metrics,
        [i["uri"] for i in images[: len(plots)]],
        [(sheet["caption"], sheet["uri"]) for sheet in sheets],
    )
    # Stored under the dimension's lock, like every stage's work: a run whose lock moved on
    # writes nothing (the Adaptive Engine appends to the same report under it).
    with held_lock(client, dimension, f"{context.run.run_id}:strategic_audit") as fenced:
        report_id = fenced.store_report(dimension, week.start, metrics, stored_md, images)
    sent = deliver_to_telegram(notifier, dimension, stored_md, plots)

    context.log.info(
        f"strategic_audit {dimension} week {week.start}: report {report_id}, "
        f"{metrics['videos_published']} videos, {len(sheets)} contact sheets, "
        f"{sent['messages']} messages, {sent['photos']} photos"
    )
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.md(
                report_markdown(
                    dimension,
                    metrics,
                    [_data_uri(p.png) for p in plots],
                    _sheet_targets(store, sheets),
                )
            ),
            "contact_sheets": len(sheets),
            "report_id": report_id,
            "videos_published": metrics["videos_published"],
            "views_per_video": metrics["views_per_video"],
            "halt_rate": metrics["halt_rate"],
            "metrics": dg.MetadataValue.json(metrics),
            "images": dg.MetadataValue.json(images),
            "telegram": dg.MetadataValue.json(sent),
        }
    )
