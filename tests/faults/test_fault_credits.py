"""The stock footage a video shows is credited in the text it is published with, and a rerun
publishes the same text.

From the shared rendered partition (a private copy: the rig), scenes are given stock footage
results, as the visuals chain records them (`engine`, and `source`: the clip's provenance).
The publications asset then publishes to the outbox, whose metadata.json holds the video
resource as it was sent: its description carries the credits in scene order, each footage once.
A publication stages its credits in its payload when it begins, so a run that takes over an
upload killed after it began publishes the credits it staged, even if the scenes changed.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from faultkit import DIMENSION, end_attempt_leases, seeding

from mdame_assets.defs.publications.assets import publications, script_credits
from mdame_domain.idempotency import idempotency_key
from mdame_domain.outbox import list_outbox
from mdame_resources.providers.publisher import OutboxPublisher


def _footage(source: str, id_: str, author: str) -> dict[str, Any]:
    page = {"pexels": "https://www.pexels.com/video/", "pixabay": "https://pixabay.com/videos/"}
    return {
        "engine": "stock",
        "source": {
            "source": source,
            "id": id_,
            "author": author,
            "page_url": f"{page[source]}{id_}/",
            "author_url": "",
        },
    }


def _give_scenes(rig, results: list[dict[str, Any]]) -> None:
    """The rig's scenes, in scene order, with these engines and sources in their results."""
    scenes = sorted(
        rig.state.list_work_units("scene", script_id=rig.script().id),
        key=lambda s: int(s.payload["scene_index"]),
    )
    assert len(scenes) >= len(results)
    with psycopg.connect(rig.db.owner, autocommit=True) as conn:
        for scene, extra in zip(scenes, results, strict=False):
            conn.execute(
                "UPDATE mdame.scenes SET result = result || %s::jsonb WHERE id = %s",
                (json.dumps(extra), scene.id),
            )


def _published_description(rig) -> str:
    [entry] = list_outbox(rig.home / "outbox")
    return json.loads(entry.metadata_path.read_text())["snippet"]["description"]


PEXELS_1 = "Video by Ana Lima on Pexels: https://www.pexels.com/video/101/"
PIXABAY_2 = "Video by WaveMaker on Pixabay: https://pixabay.com/videos/202/"


def test_the_published_description_credits_the_stock_footage(rig) -> None:
    _give_scenes(
        rig,
        [
            _footage("pixabay", "202", "WaveMaker"),
            {"engine": "generated", "source": {"model": "m", "still_uri": "media://s"}},
            _footage("pexels", "101", "Ana Lima"),
            _footage("pixabay", "202", "WaveMaker"),  # the same clip again: credited once
        ],
    )

    done = rig.materialize([publications])

    assert done.success, [e.message for e in done.all_events if e.is_failure]
    description = _published_description(rig)
    script_text = rig.script().payload["script"]["text"].strip()
    # The script's text, then the credits in scene order, then hashtags and marker.
    assert description.startswith(script_text)
    credits = description[len(script_text) :].strip().split("\n\n")[0]
    assert credits.splitlines() == [PIXABAY_2, PEXELS_1]
    [(payload,)] = _rows(rig, "SELECT payload FROM mdame.publications")
    assert [c["id"] for c in payload["credits"]] == ["202", "101"]


def test_a_takeover_publishes_the_credits_its_publication_staged(rig) -> None:
    _give_scenes(rig, [_footage("pexels", "101", "Ana Lima")])
    script = rig.script()
    render = rig.state.get_work_unit("render", script.result["render_id"])
    [account] = rig.state.list_accounts(DIMENSION)
    key = idempotency_key(script.idempotency_key, "publication", account.platform, account.handle)
    payload = {
        "script_id": script.id,
        "render_id": render.id,
        "account_id": account.id,
        "content_sha256": render.payload["sha256"],
        "credits": script_credits(rig.state, script),
    }
    publisher = OutboxPublisher()
    with seeding(rig.state) as killed:  # a run killed right after its upload began
        start = killed.begin_bucket_upload(
            key,
            payload,
            publisher.upload_quota_bucket,
            publisher.upload_quota_units,
            publisher.provider_name,
            ["technical", "content"],
            600,
        )
        assert start.action == "submit", start
    end_attempt_leases(rig.db.owner, key)
    # Meanwhile the scene's record names other footage: the staged credits stand.
    _give_scenes(rig, [_footage("pexels", "999", "Someone Else")])

    done = rig.materialize([publications])

    assert done.success, [e.message for e in done.all_events if e.is_failure]
    description = _published_description(rig)
    assert PEXELS_1 in description and "Someone Else" not in description
    assert rig.script().state == "published"


def _rows(rig, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(rig.db.owner, autocommit=True) as conn:
        return conn.execute(query).fetchall()
