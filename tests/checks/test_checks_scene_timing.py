"""scene_timing: each scene's clip starts on its first spoken word, measured on the render's
frames against the scene clips.

The rendered partition's render (cut on its words) passes, read from what the render measured
of the frames it encoded. A render cut the old way, the voice's length split over the scenes by
weight, recorded as the approved file (as only a bug in the render step could), is decoded and
fails, naming the scene, where its words start and where its clip was found; publishing waits
(the operator's alert is the partition's one check_blocked alert, which another check failing
on the smaller frame may send first).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from checkkit import evaluation, graph, materialized, not_started, problems
from psycopg.types.json import Jsonb

from mdame_assets.defs.renders.assets import scene_timing
from mdame_domain.render import scene_durations, scene_frame_counts

PUBLISHING = ("renders", "publications")
FPS = 24


def _scenes(rig):
    return sorted(
        rig.state.list_work_units("scene", script_id=rig.script().id),
        key=lambda s: s.payload["scene_index"],
    )


def _approved(rig):
    render = rig.state.get_work_unit("render", rig.script().result["render_id"])
    assert render.state == "approved"
    return render


def test_a_render_cut_on_its_words_passes_from_what_it_measured_as_it_encoded(rendered_rig):
    rig = rendered_rig
    render = _approved(rig)
    payload = render.payload
    timing = scene_timing(rig.state, rig.script())
    assert timing.method == "words", timing.notes
    # The render recorded the spans it cut on: from each scene's first spoken word.
    spans = payload["scene_spans"]
    assert [s["how"] for s in spans] == ["start"] + ["word"] * (len(spans) - 1)
    assert [s["words_start_s"] for s in spans] == [round(s.words_start_s, 4) for s in timing.spans]
    assert payload["scene_durations_s"] == [round(d, 4) for d in timing.durations_s]
    # ... and where its frames cut, read as they were encoded: on the frame of each cut.
    cuts = payload["scene_cuts"]
    assert cuts["sha256"] == payload["sha256"]
    for reading, span in zip(cuts["readings"], spans[1:], strict=True):
        assert abs(reading["found_s"] - span["start_s"]) <= 0.5 / FPS + 1e-6, reading

    result = rig.materialize(graph(only=PUBLISHING))

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    check = evaluation(result, "scene_timing")
    assert check.passed, problems(check)
    metadata = {k: v.value for k, v in check.metadata.items()}
    assert metadata["renders_checked"] == 1
    assert metadata["renders_measured_now"] == 0  # the approved bytes were measured once
    assert metadata["worst_offset_s"] <= 0.5 / FPS + 1e-6
    [entry] = metadata["per_render"].values()
    assert entry["method"] == "words" and len(entry["cuts"]) == len(spans) - 1
    assert rig.script().state == "published"


def _weight_split_render(rig, tmp_path: Path) -> tuple[list[float], str]:
    """The approved render's clips cut by weight over the voice's length, with its sound (at a
    smaller frame, quickly): the cuts and the file."""
    render = _approved(rig)
    store = rig.store()
    scenes = _scenes(rig)
    voice = rig.state.get_work_unit("voice_track", int(rig.script().result["voice_track_id"]))
    durations = scene_durations(
        [s.payload["plan"]["duration_weight"] for s in scenes], voice.payload["duration_s"]
    )
    frames = scene_frame_counts(durations, FPS)
    args = ["ffmpeg", "-nostdin", "-v", "error", "-y"]
    for scene in scenes:
        clip = store.verified_path(scene.result["uri"], scene.result["sha256"])
        args += ["-stream_loop", "-1", "-i", str(clip)]
    args += ["-i", str(store.verified_path(render.payload["uri"], render.payload["sha256"]))]
    chains = [
        f"[{i}:v]fps={FPS},trim=end_frame={n},setpts=PTS-STARTPTS,"
        f"scale=540:960:force_original_aspect_ratio=increase,crop=540:960,setsar=1[v{i}]"
        for i, n in enumerate(frames)
    ]
    joined = "".join(f"[v{i}]" for i in range(len(frames)))
    graph_text = ";".join([*chains, f"{joined}concat=n={len(frames)}:v=1:a=0[v]"])
    bad = tmp_path / "by-weight.mp4"
    subprocess.run(
        [*args, "-filter_complex", graph_text, "-map", "[v]", "-map", f"{len(scenes)}:a",
         "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-r", str(FPS),
         "-c:a", "copy", "-shortest", str(bad)],
        check=True, timeout=300,
    )  # fmt: skip
    cuts, elapsed = [], 0
    for n in frames[:-1]:
        elapsed += n
        cuts.append(elapsed / FPS)
    return cuts, str(bad)


def test_a_render_cut_by_weight_fails_naming_the_scene_and_holds_publishing(
    rendered_rig, tmp_path: Path
):
    rig = rendered_rig
    render = _approved(rig)
    timing = scene_timing(rig.state, rig.script())
    by_weight, bad = _weight_split_render(rig, tmp_path)
    pairs = list(enumerate(zip(by_weight, timing.word_cuts_s, strict=True), start=1))
    # Clearly off (by more than the tolerance and a frame), and possibly off (a frame less).
    off = [
        (scene, cut, words) for scene, (cut, words) in pairs if abs(cut - words) > 0.25 + 1 / FPS
    ]
    near = {scene for scene, (cut, words) in pairs if abs(cut - words) > 0.25 - 1 / FPS}
    assert off, "the weights should cut this script off its words somewhere"
    stored = rig.store().put_file(Path(bad), ".mp4")
    # Recorded as the approved file, spans and all (what it measured is of other bytes).
    payload = {**render.payload, "uri": stored.uri, "sha256": stored.sha256}
    payload.pop("probe")
    rig.owner_execute(
        "UPDATE mdame.renders SET payload = %s WHERE id = %s", (Jsonb(payload), render.id)
    )

    result = rig.materialize(graph(only=PUBLISHING))

    check = evaluation(result, "scene_timing")
    assert not check.passed
    assert check.metadata["renders_measured_now"].value == 1
    found = problems(check)
    assert all(p.startswith(f"render {render.id}: scene ") for p in found), found
    for scene, cut, words in off:
        [line] = [p for p in found if p.startswith(f"render {render.id}: scene {scene} ")]
        assert f"starts at {cut:.2f}s in the render, its words at {words:.2f}s" in line, line
    # The cuts the weights happen to put near the words pass.
    failed = {int(p.split(": scene ")[1].split(" ")[0]) for p in found}
    assert {scene for scene, _, _ in off} <= failed <= near, found
    assert materialized(result) == {"renders"}
    assert not_started(result, "publications") == ["publications"]
    assert rig.state.list_work_units("publication") == []


def test_a_render_cut_by_weight_before_the_change_is_rendered_again_before_publishing(
    rendered_rig,
):
    # A database that outlived the change holds renders cut by weight (no spans recorded):
    # scene_timing would hold them back forever. They are made again instead.
    rig = rendered_rig
    render = _approved(rig)
    payload = {k: v for k, v in render.payload.items() if k not in ("scene_spans", "scene_cuts")}
    rig.owner_execute(
        "UPDATE mdame.renders SET payload = %s WHERE id = %s", (Jsonb(payload), render.id)
    )

    result = rig.materialize(graph(only=PUBLISHING))

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    stale = rig.state.get_work_unit("render", render.id)
    assert stale.state == "failed" and "cut by weight" in stale.result["reason"]
    current = _approved(rig)
    assert current.id != render.id and "scene_spans" in current.payload
    # The same inputs: the stored file is reused, and its cuts read from its decoded frames.
    assert current.payload["sha256"] == render.payload["sha256"]

    def cuts(payload):
        return [(r["found_s"], r["low_s"], r["high_s"]) for r in payload["scene_cuts"]["readings"]]

    # (The decoded frames differ from those encoded by the encode's loss only.)
    assert cuts(current.payload) == cuts(render.payload)
    assert evaluation(result, "scene_timing").passed
    assert rig.script().state == "published"
