"""caption_layout: the caption and hook boxes a render recorded lie inside the Shorts
safe area. It passes on the real render and fails, holding publishing back, when a recorded
box leaves the area (a layout bug, simulated by editing the recorded boxes as the owner) or
when a render recorded no boxes at all."""

from __future__ import annotations

import json

import pytest
from checkkit import evaluation, graph, materialized, not_started, problems

from mdame_domain.captions import (
    HOOK_MAX_S,
    HOOK_MIN_S,
    SHORTS_SAFE_ZONE,
    caption_layout_problems,
    hook_end_s,
    safe_box,
)
from mdame_domain.voice import WordTiming


def _render(rig):
    script = rig.script()
    render = rig.state.get_work_unit("render", script.result["render_id"])
    assert render.state == "approved"
    return render


def _publishing_side(rig) -> dict:
    return {
        "publications": rig.state.list_work_units("publication"),
        # Videos only: offline alerts (issue 12) are files under outbox/telegram/.
        "outbox": sorted(
            p.name for p in (rig.home / "outbox").rglob("*") if "telegram" not in p.parts
        ),
        "script": rig.script().state,
    }


def _set_boxes(rig, render_id: int, boxes) -> None:
    # Only a bug in the layout or the render could record such boxes: simulated as the owner.
    rig.owner_execute(
        "UPDATE mdame.renders SET payload = jsonb_set(payload, '{caption_boxes}', %s::jsonb) "
        "WHERE id = %s",
        [json.dumps(boxes), render_id],
    )


def test_caption_layout_passes_on_the_real_render(rendered_rig):
    rig = rendered_rig
    render = _render(rig)
    boxes = render.payload["caption_boxes"]
    kinds = {box["kind"] for box in boxes}
    assert kinds == {"caption", "hook"}  # no scene titles: the title is the platform's
    [hook] = [b for b in boxes if b["kind"] == "hook"]
    written = rig.script().payload["script"]["hook"]
    # The narration opens with the hook: it stays until it has been said.
    voice = rig.state.get_work_unit("voice_track", rig.script().result["voice_track_id"])
    said = hook_end_s([WordTiming(**w) for w in voice.payload["words"]], written)
    assert hook["start_s"] == 0.0 and hook["end_s"] == round(said, 3)
    assert HOOK_MIN_S <= said <= HOOK_MAX_S
    assert hook["text"] == " ".join(written.split())
    assert caption_layout_problems(boxes, 1080, 1920, SHORTS_SAFE_ZONE) == []

    result = rig.materialize(graph(only=("renders", "publications")))

    check = evaluation(result, "caption_layout")
    assert check.passed and result.success
    metadata = {k: v.value for k, v in check.metadata.items()}
    assert metadata["problems"] == []
    assert metadata["renders_checked"] == 1
    assert metadata["boxes_checked"] == len(boxes)
    assert 0.5 < metadata["max_box_bottom_fraction"] <= 1 - SHORTS_SAFE_ZONE.bottom
    assert 0.5 < metadata["max_box_right_fraction"] <= 1 - SHORTS_SAFE_ZONE.right
    assert metadata["min_margin_px"] >= 0
    assert rig.script().state == "published"


@pytest.mark.parametrize("damage", ["bottom", "rail", "missing"])
def test_caption_layout_fails_on_a_box_outside_the_safe_area_and_blocks_publishing(
    rendered_rig, damage
):
    rig = rendered_rig
    render = _render(rig)
    boxes = [dict(b) for b in render.payload["caption_boxes"]]
    safe = safe_box(1080, 1920)
    if damage == "bottom":  # the first caption pushed down into the platform's bottom UI
        index = next(i for i, b in enumerate(boxes) if b["kind"] == "caption")
        boxes[index]["y"] = safe.bottom - boxes[index]["h"] + 40
        expected = [f"render {render.id}: caption box {index} ", "bottom by 40 px"]
    elif damage == "rail":  # the hook widened under the right-hand button rail
        index = next(i for i, b in enumerate(boxes) if b["kind"] == "hook")
        boxes[index]["w"] = safe.right - boxes[index]["x"] + 25
        expected = [f"render {render.id}: hook box {index} ", "right by 25 px"]
    else:  # a render that recorded no layout cannot be shown to keep its captions clear
        boxes = []
        expected = [f"render {render.id}: no caption boxes recorded"]
    _set_boxes(rig, render.id, boxes)
    before = _publishing_side(rig)

    result = rig.materialize(graph(only=("renders", "publications")))

    check = evaluation(result, "caption_layout")
    assert not check.passed
    [problem] = problems(check)
    assert all(part in problem for part in expected), problem
    if damage != "missing":
        assert "outside the safe area (0,288)-(950,1440)" in problem
        assert check.metadata["min_margin_px"].value < 0
    if damage == "bottom":
        assert check.metadata["max_box_bottom_fraction"].value > 1 - SHORTS_SAFE_ZONE.bottom
    assert check.metadata["renders_checked"].value == 1
    assert materialized(result) == {"renders"}
    assert not_started(result, "publications") == ["publications"]
    assert _publishing_side(rig) == before
    assert before["publications"] == [] and before["outbox"] == []
