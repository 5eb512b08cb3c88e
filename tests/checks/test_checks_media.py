"""The media stages' checks fail on bad media and hold back every stage after them:
clips_present, its re-check inside voice_tracks (scene_clips and its check ran in the GPU code
location), voice_present and render_probe.

Bad media is made the way it happens: a TTS that returns silence, and stored files that vanish
or rot after they were checked (deleted, truncated, replaced or re-muxed with real ffmpeg).
"""

from __future__ import annotations

import pytest
from checkkit import (
    ORDER,
    SilentVoice,
    evaluation,
    graph,
    materialized,
    not_started,
    problems,
    remux_with_new_title,
    replace_with_small_silent_video,
    stored_path,
    truncate_half,
)

from mdame_domain.media_profile import media_profile
from mdame_domain.media_store import sha256_file
from mdame_resources.providers.voice import EspeakVoice

# The frame the format gate expects in this run's media profile.
FRAME = f"{media_profile().width}x{media_profile().height}"

FROM_CLIPS = ORDER[ORDER.index("scene_clips") :]
AFTER_CLIPS = ORDER[ORDER.index("voice_tracks") :]
AFTER_VOICE = ORDER[ORDER.index("renders") :]


def _first_scene(rig):
    script = rig.script()
    scenes = rig.state.list_work_units("scene", script_id=script.id)
    return script, min(scenes, key=lambda s: s.payload["scene_index"])


def _voice_side(rig) -> dict:
    """What voice_tracks would change: its rows, the script and the stored media."""
    script = rig.script()
    return {
        "voice_tracks": rig.state.list_work_units("voice_track"),
        "script": (script.state, script.updated_at),
        "media": rig.media_files(),
    }


def _publishing_side(rig) -> dict:
    return {
        "publications": rig.state.list_work_units("publication"),
        # Videos only: offline alerts (issue 12) are files under outbox/telegram/.
        "outbox": sorted(
            p.name for p in (rig.home / "outbox").rglob("*") if "telegram" not in p.parts
        ),
    }


def _assert_voice_held_back(rig, result, script_before) -> None:
    assert not_started(result, *AFTER_CLIPS) == list(AFTER_CLIPS)
    assert rig.state.list_work_units("voice_track") == []
    assert rig.script().state == script_before.state == "visuals_ready"


def test_clips_present_fails_on_a_deleted_clip(clipped_rig):
    rig = clipped_rig
    script, scene = _first_scene(rig)
    uri = scene.result["uri"]
    stored_path(rig.store(), uri).unlink()

    result = rig.materialize(graph(only=FROM_CLIPS))

    check = evaluation(result, "clips_present")
    assert not check.passed
    assert f"scene {scene.id}: clip {uri} is missing from the media store" in problems(check)
    assert all(uri in p for p in problems(check))  # a clip shared by scenes is named per scene
    assert materialized(result) == {"scene_clips"}
    _assert_voice_held_back(rig, result, script)


def test_clips_present_fails_on_a_clip_whose_bytes_rotted(clipped_rig):
    rig = clipped_rig
    script, scene = _first_scene(rig)
    uri = scene.result["uri"]
    path = stored_path(rig.store(), uri)
    truncate_half(path)  # still there, under the same name, but not the clip that was made
    actual = sha256_file(path)

    result = rig.materialize(graph(only=FROM_CLIPS))

    check = evaluation(result, "clips_present")
    assert not check.passed
    assert f"scene {scene.id}: clip {uri} is corrupt: its bytes hash to {actual[:12]}" in problems(
        check
    )
    _assert_voice_held_back(rig, result, script)


def test_voice_tracks_heals_a_clip_lost_after_the_gpu_location_made_it(clipped_rig):
    # The publishing job re-checks the clips itself (clips_present ran in the GPU code
    # location). A clip that vanished since is not voiced around: its scene goes back to the
    # GPU queue with a fresh job, the script back to planned, and the next scene_clips run
    # makes the clip again, after which the script is voiced as usual.
    rig = clipped_rig
    script, scene = _first_scene(rig)
    uri = scene.result["uri"]
    stored_path(rig.store(), uri).unlink()

    result = rig.materialize(graph(only=AFTER_CLIPS))

    assert result.success
    assert rig.script().state == "planned"  # nothing voiced or rendered from a missing clip
    assert rig.state.list_work_units("voice_track") == []
    assert rig.state.list_work_units("render") == []
    healed = rig.state.get_work_unit("scene", scene.id)
    assert healed.state == "queued" and healed.result["job_key"].endswith(":heal:1")
    assert "missing from the media store" in healed.result["healing"]
    assert rig.state.lookup_scene_cache(scene.payload["scene_hash"]) is None

    again = rig.materialize(graph(only=FROM_CLIPS))  # the hop sensor's scene_clips run, on

    assert again.success
    remade = rig.state.get_work_unit("scene", scene.id)
    assert remade.state == "ready"
    assert stored_path(rig.store(), remade.result["uri"]).exists()
    assert rig.script().state == "published"


def test_voice_present_fails_on_a_silent_voice(clipped_rig):
    rig = clipped_rig

    result = rig.materialize(graph(only=AFTER_CLIPS), voice=SilentVoice())

    check = evaluation(result, "voice_present")
    assert not check.passed
    script = rig.script()
    volume = check.metadata["mean_volume_db"].value[str(script.id)]
    assert volume <= -90.0  # digital silence: ffmpeg reports -91 dB or -inf
    assert problems(check) == [f"script {script.id}: voice too quiet ({volume:.1f} dB)"]
    assert materialized(result) == {"voice_tracks"}
    assert not_started(result, *AFTER_VOICE) == list(AFTER_VOICE)
    assert script.state == "voiced"
    assert rig.state.list_work_units("render") == []


def test_voice_present_fails_on_a_voice_file_replaced_after_rendering(rendered_rig, tmp_path):
    rig = rendered_rig
    script = rig.script()
    track = rig.state.get_work_unit("voice_track", script.result["voice_track_id"])
    path = stored_path(rig.store(), track.payload["uri"])
    # Loud, clear speech, but not the narration that was timed, captioned and rendered.
    other = tmp_path / "other.wav"
    EspeakVoice().synthesize("This is a different narration entirely.", "en-gb", other)
    path.chmod(0o644)
    path.write_bytes(other.read_bytes())
    before = _publishing_side(rig)

    result = rig.materialize(graph(only=AFTER_CLIPS))

    check = evaluation(result, "voice_present")
    assert not check.passed
    assert problems(check) == [
        f"script {script.id}: voice {track.payload['uri']} is corrupt: "
        f"its bytes hash to {sha256_file(path)[:12]}"
    ]
    # Audible, yet wrong: the gate goes by the bytes, and measures only the approved ones.
    assert str(script.id) not in check.metadata["mean_volume_db"].value
    assert not_started(result, *AFTER_VOICE) == list(AFTER_VOICE)
    assert _publishing_side(rig) == before == {"publications": [], "outbox": []}


def _render_file(rig):
    script = rig.script()
    render = rig.state.get_work_unit("render", script.result["render_id"])
    assert render.state == "approved"
    return render, stored_path(rig.store(), render.payload["uri"])


def _published(rig):
    first = rig.materialize(graph(only=("renders", "publications")))
    assert first.success and rig.script().state == "published"
    return _publishing_side(rig)


def test_render_probe_fails_on_a_render_replaced_by_a_wrong_video(rendered_rig):
    # Once a publication names the render's bytes it is never remade (healing is refused), so
    # the damage reaches the gate, which names it.
    rig = rendered_rig
    before = _published(rig)
    render, path = _render_file(rig)
    replace_with_small_silent_video(path)

    result = rig.materialize(graph(only=("renders", "publications")))

    check = evaluation(result, "render_probe")
    assert not check.passed
    assert check.metadata["renders_checked"].value == 1
    # The changed bytes are analysed again, each property by its own check (issue 11).
    found = problems(evaluation(result, "render_format"))
    assert f"render {render.id}: frame is 320x240, expected {FRAME}" in found
    assert f"render {render.id}: no audio track" in found
    assert f"render {render.id}: duration 4.00s outside 15-180s" in problems(
        evaluation(result, "render_duration")
    )
    assert materialized(result) == {"renders"}
    assert not_started(result, "publications") == ["publications"]
    assert _publishing_side(rig) == before
    assert len(before["outbox"]) >= 1
    assert rig.state.get_work_unit("render", render.id).state == "approved"  # not remade


def test_render_probe_fails_on_a_render_whose_bytes_changed(rendered_rig):
    rig = rendered_rig
    before = _published(rig)
    render, path = _render_file(rig)
    remux_with_new_title(path)  # same streams, same probe: only the bytes tell

    result = rig.materialize(graph(only=("renders", "publications")))

    check = evaluation(result, "render_probe")
    assert not check.passed
    assert problems(check) == [
        f"render {render.id}: {render.payload['uri']} is corrupt: "
        f"its bytes hash to {sha256_file(path)[:12]}"
    ]
    assert evaluation(result, "render_loudness").passed  # same streams: only the bytes tell
    assert not_started(result, "publications") == ["publications"]
    assert _publishing_side(rig) == before


@pytest.mark.parametrize("damage", ["deleted", "rotted"])
def test_renders_heals_a_render_lost_before_anything_was_published(rendered_rig, damage):
    rig = rendered_rig
    old, path = _render_file(rig)
    if damage == "deleted":
        path.unlink()
    else:
        remux_with_new_title(path)

    result = rig.materialize(graph(only=("renders", "publications")))

    assert result.success
    assert evaluation(result, "render_probe").passed
    failed = rig.state.get_work_unit("render", old.id)
    assert failed.state == "failed" and f"render {old.id}" in failed.result["reason"]
    script = rig.script()
    assert script.state == "published"
    current, current_path = _render_file_of(rig, script)
    assert current.id != old.id and current.state == "approved"
    assert sha256_file(current_path) == current.payload["sha256"]
    [publication] = rig.state.list_work_units("publication")
    assert publication.payload["render_id"] == current.id
    assert len(_publishing_side(rig)["outbox"]) >= 1


def test_voice_tracks_heals_a_voice_track_lost_before_its_render(clipped_rig):
    rig = clipped_rig
    voiced = rig.materialize(graph(only=("voice_tracks",)))
    assert voiced.success and rig.script().state == "voiced"
    [old] = rig.state.list_work_units("voice_track")
    stored_path(rig.store(), old.payload["uri"]).unlink()

    result = rig.materialize(graph(only=AFTER_CLIPS))

    assert result.success
    assert evaluation(result, "voice_present").passed
    failed = rig.state.get_work_unit("voice_track", old.id)
    assert failed.state == "failed" and "missing from the media store" in failed.result["reason"]
    script = rig.script()
    assert script.state == "published"
    current = rig.state.get_work_unit("voice_track", script.result["voice_track_id"])
    assert current.id != old.id and current.state == "ready"
    assert rig.store().problem(current.payload["uri"], current.payload["sha256"]) is None
    render, _ = _render_file_of(rig, script)
    assert render.payload["script_id"] == script.id


def _render_file_of(rig, script):
    render = rig.state.get_work_unit("render", script.result["render_id"])
    return render, stored_path(rig.store(), render.payload["uri"])
