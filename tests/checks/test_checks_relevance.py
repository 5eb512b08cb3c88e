"""scene_relevance: the blocking check on scene_clips that shows every scene's engine, score and
source, and fails on a scene whose picture the relevance gate did not pass.

The chain runs for real: the generated and stock engines and the relevance judge against the
local Gemini, Pexels and Pixabay servers (as `make demo PROVIDERS=fakes` does), the content
stages on the offline providers. The bad clip is made through the real path too: the
dimension's threshold is raised above what the judge scored after the clips were made, and a
procedural clip meets a deployment that runs no procedural engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checkkit import DAY, DIMENSION, ORDER, evaluation, graph, not_started, problems

from fakes import gemini as fake_gemini
from fakes import pexels, pixabay
from mdame_domain.visuals_chain import GENERATED, PROCEDURAL, STOCK
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_resources.providers.generated_visuals import GeneratedVisuals
from mdame_resources.providers.relevance import GeminiRelevanceJudge
from mdame_resources.providers.stock import StockFootage
from mdame_resources.providers.visuals import ProceduralVisuals
from tests.adminkit import as_admin

KEY = "test-key-not-secret"
AFTER_CLIPS = ORDER[ORDER.index("voice_tracks") :]


@pytest.fixture
def image_model() -> Iterator[fake_gemini.FakeGemini]:
    with fake_gemini.running() as model:
        yield model


@pytest.fixture
def stock_servers(tmp_path: Path) -> Iterator[tuple[pexels.FakePexels, pixabay.FakePixabay]]:
    with (
        pexels.running(tmp_path / "pexels") as footage,
        pixabay.running(tmp_path / "pixabay") as more_footage,
    ):
        yield footage, more_footage


@pytest.fixture
def chain_servers(image_model, stock_servers) -> Iterator[dict[str, Any]]:
    """The fakes deployment's picture resources, against local servers of their own."""
    model, (footage, more_footage) = image_model, stock_servers
    yield {
        # No GPU: the network engines of the chain, procedural only as a fallback.
        "visuals": ProceduralVisuals(offers=[GENERATED, STOCK, PROCEDURAL]),
        "generated_visuals": GeneratedVisuals(api_key=KEY, base_url=model.base_url),
        "relevance_judge": GeminiRelevanceJudge(api_key=KEY, base_url=model.base_url),
        "stock_footage": StockFootage(
            pexels_api_key=KEY,
            pexels_url=footage.base_url.rstrip("/"),
            pixabay_api_key=KEY,
            pixabay_url=more_footage.base_url.rstrip("/"),
        ),
    }


def _sync_niche(rig, folder: Path, threshold: float) -> None:
    """The niche's YAML at the shortest length a niche may ask for (the fewest scenes: each is
    a still, its motion and a judgement) and with `threshold`, synced as `mdame dimensions
    sync` would."""
    folder.mkdir(exist_ok=True)
    text = (DIMENSIONS_DIR / f"{DIMENSION}.yaml").read_text(encoding="utf-8")
    assert "threshold: 0.6," in text
    text = text.replace("threshold: 0.6,", f"threshold: {threshold},")
    (folder / f"{DIMENSION}.yaml").write_text(f"{text}target_seconds: 30\n", encoding="utf-8")
    sync_registry(as_admin(rig.state), folder)


def test_scene_relevance_shows_the_chains_scenes_and_holds_back_a_score_under_the_bar(
    content_rig, chain_servers, tmp_path
):
    rig = content_rig
    _sync_niche(rig, tmp_path / "dimensions", 0.6)

    made = rig.materialize(graph(upto="scene_clips"), **chain_servers)

    assert made.success, [e.message for e in made.all_events if e.is_failure]
    check = evaluation(made, "scene_relevance")
    assert check.passed, problems(check)
    [script] = rig.state.list_work_units("script")
    assert script.state == "visuals_ready"
    scenes = rig.state.list_work_units("scene", script_id=script.id)
    meta = {k: v.value for k, v in check.metadata.items()}
    assert meta["scenes_checked"] == len(scenes) >= 3 and meta["scenes_failing"] == 0
    assert set(meta["scenes_by_engine"]) <= {GENERATED, STOCK}
    assert meta["threshold"] == 0.6 and meta["procedural_runs_here"] is False
    table = meta["scenes"].splitlines()
    assert table[0].startswith("| script | scene | engine | score | threshold | source |")
    for scene in scenes:
        result = scene.result
        score = result["relevance"]["score"]
        assert result["relevance"]["passed"] and score >= 0.6
        source = result["source"].get("model") or result["source"]["attribution"]
        row = next(
            r
            for r in table[2:]
            if r.startswith(f"| {script.id} | {scene.payload['scene_index']} |")
        )
        assert f"| {result['engine']} | {score:.2f} | 0.60 |" in row
        assert source.split(":")[0] in row and row.endswith("| pass |")

    # The bar raised above what the judge gave (0.92 on topic) after the clips were made: the
    # same clips fail, and nothing after scene_clips runs on them.
    _sync_niche(rig, tmp_path / "dimensions", 0.95)
    held = rig.materialize(graph(only=("scene_clips", *AFTER_CLIPS)), **chain_servers)

    check = evaluation(held, "scene_relevance")
    assert not check.passed
    found = problems(check)
    assert len(found) == len(scenes)
    assert all(f"script {script.id} scene " in p and "below the threshold 0.95" in p for p in found)
    assert not_started(held, *AFTER_CLIPS) == list(AFTER_CLIPS)
    assert rig.state.list_work_units("voice_track") == []
    assert rig.script().state == "visuals_ready"
    assert "**FAIL: a " in check.metadata["scenes"].value

    # A later publishing run (the other code location, which does not see the GPU check's
    # verdict) checks again and fails the script: it is never voiced, rendered or published.
    later = rig.materialize(graph(only=AFTER_CLIPS), **chain_servers)

    assert later.success, [e.message for e in later.all_events if e.is_failure]
    failed = rig.script()
    assert failed.state == "failed"
    assert rig.state.list_work_units("voice_track") == []
    assert rig.state.list_work_units("publication") == []
    voiced = next(
        e for e in later.get_asset_materialization_events() if e.asset_key.path == ["voice_tracks"]
    )
    metadata = voiced.event_specific_data.materialization.metadata
    assert metadata["scripts_failed_relevance"].value == [script.id]


def test_scene_relevance_passes_procedural_clips_only_where_scenes_are_made_procedurally(
    clipped_rig,
):
    rig = clipped_rig  # offline: every scene procedural, its clips made
    selection = graph(only=("scene_clips", *AFTER_CLIPS))
    offline = rig.materialize(graph(only=("scene_clips",)))

    check = evaluation(offline, "scene_relevance")
    assert check.passed
    assert check.metadata["procedural_runs_here"].value is True
    assert check.metadata["scenes_by_engine"].value == {
        PROCEDURAL: check.metadata["scenes_checked"].value
    }

    # The same database under a deployment whose chain runs (stock here): its procedural
    # clips were judged by nobody.
    elsewhere = rig.materialize(selection, visuals=ProceduralVisuals(offers=[STOCK]))

    check = evaluation(elsewhere, "scene_relevance")
    assert not check.passed
    assert all(
        "a procedural clip, and this deployment makes no scene" in p for p in problems(check)
    )
    assert not_started(elsewhere, *AFTER_CLIPS) == list(AFTER_CLIPS)
    assert rig.script().state == "visuals_ready"


def test_a_scene_no_engine_can_picture_rejects_its_script_with_every_reason(
    content_rig, chain_servers, image_model, tmp_path
):
    """The bar above anything the judge gives before the clips are made: each scene's chain
    tries a still and a stock clip (the cap of 2 shared by the two engines), rejects both, and
    the script is rejected with the reasons; nothing is voiced, and nothing is paid twice on a
    rerun."""
    rig = content_rig
    folder = tmp_path / "dimensions"
    _sync_niche(rig, folder, 0.95)
    path = folder / f"{DIMENSION}.yaml"
    text = path.read_text(encoding="utf-8").replace("max_candidates: 4", "max_candidates: 2")
    path.write_text(text, encoding="utf-8")
    sync_registry(as_admin(rig.state), folder)

    made = rig.materialize(graph(upto="scene_clips"), **chain_servers)

    assert made.success, [e.message for e in made.all_events if e.is_failure]
    script = rig.script()
    assert script.state == "rejected"
    scenes = rig.state.list_work_units("scene", script_id=script.id)
    assert scenes and all(s.state == "failed" for s in scenes)
    unpictured = rig.state.list_events("script", script.id)[-1].detail["scenes_without_picture"]
    assert len(unpictured) == len(scenes)
    for entry in unpictured:
        reasons = entry["reasons"]
        assert any(r.startswith("generated#0: 0.92 below 0.95") for r in reasons), reasons
        assert any(r.startswith("stock#") for r in reasons), reasons
    [clips] = made.asset_materializations_for_node("scene_clips")
    assert clips.metadata["scripts_rejected"].value == 1

    # Run again: nothing is asked of the image model or judged a second time.
    billed = image_model.counters()["billed"]
    assert sum(b["images"] for b in billed) == len(scenes)  # one still a scene, the cap's half
    again = rig.materialize(graph(upto="scene_clips"), **chain_servers)
    assert again.success
    assert image_model.counters()["billed"] == billed
    assert rig.state.list_work_units("voice_track") == []


def test_a_refused_stock_key_fails_the_scene_at_once_naming_the_variable(
    content_rig, chain_servers, stock_servers, tmp_path
):
    """A chain of stock alone, and Pexels refusing the key: the scene's job fails for good with
    Pexels' words and the variable to set (no retry would change it), and the run says so."""
    rig = content_rig
    folder = tmp_path / "dimensions"
    _sync_niche(rig, folder, 0.6)
    path = folder / f"{DIMENSION}.yaml"
    text = path.read_text(encoding="utf-8").replace("chain: [generated, stock]", "chain: [stock]")
    path.write_text(text, encoding="utf-8")
    sync_registry(as_admin(rig.state), folder)
    footage, _ = stock_servers
    footage.keys = {"another-key"}

    made = rig.materialize(graph(upto="scene_clips"), **chain_servers)

    assert not made.success
    failures = [e.step_failure_data.error.message for e in made.all_events if e.is_step_failure]
    assert any("MDAME_PEXELS_API_KEY" in (m or "") for m in failures), failures
    assert all(KEY not in (m or "") for m in failures)
    jobs = rig.state._select("SELECT state, attempt FROM mdame.jobs WHERE job_type = 'scene_clip'")
    assert jobs and {state for state, _ in jobs} <= {"failed", "queued"}
    assert ("failed", 1) in jobs  # refused once, not retried


def test_a_spent_budget_makes_the_scenes_wait_for_the_next_day_not_fail(
    content_rig, chain_servers, image_model, tmp_path
):
    """The day's budget cannot pay for one still: no image is asked for, every scene's job waits
    until the next UTC day with its attempt given back, the run succeeds, and the partition says
    what it waits for (the hop sensor asks again then)."""
    rig = content_rig
    folder = tmp_path / "dimensions"
    _sync_niche(rig, folder, 0.6)
    path = folder / f"{DIMENSION}.yaml"
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"daily_budget_usd: [0-9.]+", "daily_budget_usd: 0.01", text)
    path.write_text(text, encoding="utf-8")
    sync_registry(as_admin(rig.state), folder)

    made = rig.materialize(graph(upto="scene_clips"), **chain_servers)

    assert made.success, [e.message for e in made.all_events if e.is_failure]
    assert image_model.counters()["images"] == 0
    assert rig.script().state == "planned"
    jobs = rig.state._select(
        "SELECT state, attempt, run_after::date - now()::date FROM mdame.jobs"
        " WHERE job_type = 'scene_clip'"
    )
    assert jobs and all(
        state == "queued" and attempt == 0 and days == 1 for state, attempt, days in jobs
    )
    [clips] = made.asset_materializations_for_node("scene_clips")
    assert clips.metadata["scenes_waiting"].value == len(jobs)
    dimension = rig.state.get_dimension(DIMENSION)
    until, what = rig.state.partition_wait(dimension.id, DAY)
    assert until is not None and "scene's picture" in what
