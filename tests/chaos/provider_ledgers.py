"""The production providers' ledgers against the local servers' own counters.

The budget ledger is compared with what the Gemini fake answered and billed (its
`counters()`: requests per status, each billed answer's usageMetadata), the quota ledger with
what the YouTube and TikTok fakes charged (tests/chaos/invariants.py `_quota_against_counters`,
through `violations(..., channel=InProcessChannel(youtube, tiktok))`). Reads only.

A SIGKILL can land between Gemini's answer and the ledger's record of it: the next run settles
that attempt at its estimate (the answer's usage is lost with the process), or the kill lands
after the attempt was recorded and before its request left. So with `killed`, each such
attempt may stand for one billed answer or for no request at all; without, the two sides match
one to one.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from mdame_domain.dimensions import load_registry
from mdame_domain.generated_stills import IMAGE_PRICES_MICROS
from mdame_domain.paid_calls import ModelPrice, cost_micros, price_for
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from mdame_resources.providers.publisher.listing import THUMBNAIL_SET_UNITS
from tests.chaos.channel import (
    ChannelView,
    instagram_view,
    merged,
    tiktok_view,
    youtube_view,
)


class InProcessChannel:
    """A fakes.youtube server, and fakes.tiktok and fakes.instagram ones, running in this
    process, read as invariants.py reads a ChannelProcess: one view of them all."""

    def __init__(self, fake: Any, creators: Any = None, reels: Any = None) -> None:
        self.fake, self.creators, self.reels = fake, creators, reels

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = self.fake.snapshot()
        return data

    def video_bytes(self, upload_id: str) -> bytes:
        data: bytes = self.fake.state.blob(upload_id).read_bytes()
        return data

    def view(self) -> ChannelView:
        views = [youtube_view(self.state(), self.video_bytes)]
        if self.creators is not None:
            views.append(tiktok_view(self.creators.snapshot(), self.creators.state.folder))
        if self.reels is not None:
            views.append(instagram_view(self.reels.snapshot(), self.reels.state.folder))
        return merged(*views)


def _prices(dimensions: Path) -> dict[str, dict[str, ModelPrice]]:
    registry = load_registry(dimensions)
    return {
        d.slug: {model: ModelPrice(i, o) for model, i, o in d.gemini_prices}
        for d in registry.dimensions
    }


def _image_prices(dimensions: Path) -> dict[str, dict[str, int]]:
    """Per dimension, what an image of its generated engine's model costs (its own price, else
    the price list's), beside the price list's other image models."""
    found: dict[str, dict[str, int]] = {}
    for d in load_registry(dimensions).dimensions:
        generated = d.visuals.generated
        prices = dict(IMAGE_PRICES_MICROS)
        if generated.usd_per_image is not None or generated.model in prices:
            prices[generated.model] = generated.price_micros
        found[d.slug] = prices
    return found


def _usage_key(model: str, usage: dict[str, Any]) -> tuple[str, int, int, int]:
    return (
        model,
        int(usage.get("promptTokenCount", usage.get("prompt", 0)) or 0),
        int(usage.get("candidatesTokenCount", usage.get("output", 0)) or 0),
        int(usage.get("thoughtsTokenCount", usage.get("thoughts", 0)) or 0),
    )


def budget_against_gemini(
    app_url: str,
    counters: dict[str, Any],
    *,
    killed: bool,
    since: datetime | None = None,
    dimensions: Path = DIMENSIONS_DIR,
) -> list[str]:
    """Every broken promise between the budget ledger and the Gemini server's counters: the
    ledger balances (every reservation settled or released, none held); each settled entry is
    the cost of the usage Gemini reported for it (or its estimate, for an attempt whose answer
    was lost); the usages settled are the usages Gemini billed; the failures released are the
    error answers Gemini gave; and Gemini saw one request per attempt. An image model's call is
    priced per image (the dimension's price per image, times the images Gemini answered, which
    must be the images it billed), a relevance judgement by its tokens, the keyframes' among
    them, as a text call. No work key was paid for twice (two attempts that succeeded).
    `since`: only attempts made from then on (the server's counters start there), on a
    database older than it."""
    prices, image_prices = _prices(dimensions), _image_prices(dimensions)
    found: list[str] = []
    with psycopg.connect(app_url, autocommit=True) as conn:
        entries = conn.execute(
            "SELECT attempt_key, state, reserved_micros, actual_micros FROM mdame.budget_ledger"
        ).fetchall()
        attempts = conn.execute(
            """SELECT id, provider, status, detail, work_key FROM mdame.provider_attempts
                WHERE provider LIKE 'gemini:%%' AND (%s::timestamptz IS NULL OR created_at >= %s)
                ORDER BY id""",
            [since, since],
        ).fetchall()
    ledger = {key: (state, reserved, actual) for key, state, reserved, actual in entries}
    held = [key for key, (state, _, _) in ledger.items() if state == "reserved"]
    if held:
        found.append(f"budget: {len(held)} reservations still held ({held[:3]})")
    settled = sum(1 for state, _, _ in ledger.values() if state == "settled")
    released = sum(1 for state, _, _ in ledger.values() if state == "released")
    if settled + released != len(ledger):
        found.append(f"budget: {len(ledger)} reserved, {settled} settled + {released} released")
    usages: Counter[tuple[str, int, int, int]] = Counter()
    at_estimate = images = 0
    codes: Counter[str] = Counter()
    succeeded: Counter[str] = Counter()
    for attempt_id, provider, status, detail, work_key in attempts:
        if status == "succeeded":
            succeeded[work_key] += 1
        model = provider.split(":", 1)[1]
        name = f"Gemini attempt {attempt_id} ({model}, {status})"
        entry = ledger.get(str(detail.get("budget_key")))
        if entry is None:
            found.append(f"{name} has no budget entry")
            continue
        state, reserved, actual = entry
        usage = detail.get("usage")
        if "settled_at_estimate" in detail:
            at_estimate += 1
            if (state, actual) != ("settled", reserved):
                found.append(f"{name}: settled at the estimate {reserved}, ledger {state} {actual}")
        elif isinstance(usage, dict) and status in ("succeeded", "failed"):
            usages[_usage_key(model, usage)] += 1
            dimension = str(detail.get("dimension"))
            if "per_image_micros" in detail:  # an image model: priced per image answered
                per_image = image_prices.get(dimension, IMAGE_PRICES_MICROS).get(model)
                if detail["per_image_micros"] != per_image:
                    found.append(
                        f"{name}: priced {detail['per_image_micros']} an image, the "
                        f"dimension's price is {per_image}"
                    )
                images += int(detail.get("images", 0))
                cost = int(per_image or 0) * int(detail.get("images", 0))
            else:
                price = price_for(model, prices.get(dimension, {}))
                cost = cost_micros(
                    price, int(usage["prompt"]), int(usage["output"]), int(usage["thoughts"])
                )
            if (state, actual) != ("settled", cost):
                found.append(f"{name}: its usage costs {cost}, the ledger has {state} {actual}")
        elif detail.get("released") or state == "released":  # a 4xx refusal is released too
            if "code" in detail:  # else it was never sent ("not sent": no connection)
                codes[str(detail["code"])] += 1
            if state != "released":
                found.append(f"{name}: released, its budget entry is {state}")
        elif detail.get("settled_at") == "estimate":  # a 200 whose body was not JSON
            at_estimate += 1
        elif status not in ("submitted", "unknown") or state != "reserved":
            found.append(f"{name}: budget {state} {actual} for no usage Gemini reported")
    twice = sorted(key for key, n in succeeded.items() if n > 1)
    if twice:
        found.append(f"budget: work keys paid for more than once: {twice[:3]}")
    billed_images = int(counters.get("images", 0))
    if images > billed_images or billed_images - images > (at_estimate if killed else 0):
        found.append(
            f"budget: {images} images settled, Gemini answered {billed_images} "
            f"({at_estimate} attempts were settled at their estimate)"
        )
    billed = Counter(_usage_key(b["model"], b["usage"]) for b in counters["billed"])
    unpaid = billed - usages  # billed answers no attempt settled at their usage
    if usages - billed:
        found.append(f"budget: usages settled that Gemini never billed: {dict(usages - billed)}")
    lost = sum(unpaid.values())
    if lost > (at_estimate if killed else 0):
        found.append(
            f"budget: {lost} billed Gemini answers are in no settled attempt "
            f"({at_estimate} attempts were settled at their estimate)"
        )
    by_status: dict[str, int] = counters["by_status"]
    for code, n in sorted(codes.items()):
        answered = by_status.get(code, 0)
        if n > answered if killed else n != answered:
            found.append(f"budget: {n} attempts released on a {code}, Gemini answered {answered}")
    requests, sent = int(counters["requests"]), len(attempts)
    if requests > sent or sent - requests > (at_estimate if killed else 0):
        found.append(f"Gemini saw {requests} requests for {sent} recorded attempts")
    return found


def killed_call_excesses(kills: int) -> set[int]:
    """What `kills` calls of the units bucket killed around their requests may add to the
    ledger beyond the channel's charge: each is a list call's unit or thumbnails.set's 50."""
    return {
        lists + THUMBNAIL_SET_UNITS * thumbnails
        for lists in range(kills + 1)
        for thumbnails in range(kills + 1 - lists)
    }


def quota_against_channels(app_url: str, channel: Any, *, kills: int = 0) -> list[str]:
    """Each account's committed quota ledger (per bucket, every day) against what the fake
    channel charged. A call killed around its request cannot be asked about: the next run
    commits it, so the units bucket may count one such call more per kill
    (`killed_call_excesses`), never less; inserts are known exactly."""
    view = channel.view()
    found = []
    with psycopg.connect(app_url, autocommit=True) as conn:
        accounts = dict(conn.execute("SELECT id, handle FROM mdame.dimension_accounts").fetchall())
        ledger = {
            (account, bucket): int(units)
            for account, bucket, units in conn.execute(
                """SELECT account_id, bucket, sum(units) FROM mdame.quota_ledger
                    WHERE state = 'committed' GROUP BY 1, 2"""
            ).fetchall()
        }
    for account, handle in sorted(accounts.items()):
        if handle not in view.accounts:
            continue
        for bucket in ("insert", "search", "units"):
            charged = view.charged.get((handle, bucket), 0)
            committed = ledger.get((account, bucket), 0)
            allowed = killed_call_excesses(kills if bucket == "units" else 0)
            if committed - charged not in allowed:
                found.append(
                    f"quota of account {handle}, {bucket} bucket: the ledger committed "
                    f"{committed}, the channel charged {charged}"
                )
    return found
