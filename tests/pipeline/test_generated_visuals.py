"""One partition made with the production visuals provider, DiffusersVisuals, on the CPU with
the tiny random-weight SVD pipelines, instead of the procedural clips: the scene steps generate
through the real loading and generation path, the scene_hash names the engine and its models,
and the render built from the generated clips passes every quality gate and is published."""

from __future__ import annotations

import re
import shutil
from datetime import date
from pathlib import Path

import dagster as dg

from fakes import gemini
from mdame_cli.runs import whole_graph
from mdame_domain.dimensions import dimension_from_json
from mdame_domain.media_store import sha256_file
from mdame_domain.probe import probe_media
from mdame_domain.scenes import scene_hash
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from mdame_pipeline.scene_cache import CLIP_SECONDS
from mdame_pipeline.scene_pictures import SceneEngines, scene_chain_for
from mdame_resources.providers.diffusers_visuals import loaded_count
from mdame_resources.providers.relevance import GeminiRelevanceJudge
from mdame_runtime.partition_keys import partition_key
from tests.gpu.conftest import tiny_model_dir, tiny_visuals  # noqa: F401 - fixtures

DAY = date(2026, 11, 29)
SLUG = "science"  # visuals: {engine: svd}, its chain made [diffusers] here


def diffusers_niches(folder: Path) -> Path:
    """The sample niches with the science niche's chain set to diffusers alone."""
    shutil.copytree(DIMENSIONS_DIR, folder)
    path = folder / f"{SLUG}.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"chain: \[[^\]]*\]", "chain: [diffusers]", text), encoding="utf-8")
    return folder


def test_a_partition_publishes_from_clips_the_diffusers_provider_generated(
    pipeline,
    tiny_visuals,  # noqa: F811 - the fixture imported above
    tmp_path,
):
    pipeline.sync(diffusers_niches(tmp_path / "niches"))
    # The relevance gate judges the random-weight clips through the real client, against the
    # local Gemini server told to pass them (noise shows nothing it could recognise).
    with gemini.running() as model:
        model.set_score(0.9)
        resources = {
            **pipeline.resources,
            "visuals": tiny_visuals,
            "relevance_judge": GeminiRelevanceJudge(api_key="test-key", base_url=model.base_url),
        }
        result = dg.materialize(
            whole_graph(),
            partition_key=str(partition_key(DAY, SLUG)),
            instance=pipeline.instance,
            resources=resources,
            raise_on_error=False,
        )

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks), [c.check_name for c in checks if not c.passed]
    state = pipeline.state
    [script] = state.list_work_units("script")
    assert script.state == "published"
    scenes = state.list_work_units("scene", script_id=script.id)
    assert len(scenes) >= 3 and all(s.state == "ready" for s in scenes)

    key = tiny_visuals.cache_key("svd")
    assert key is not None and "svd" in key  # a generated clip's key names engine and models
    dimension = dimension_from_json(state.get_dimension(SLUG).config)  # type: ignore[union-attr]
    engines = SceneEngines(
        tiny_visuals,
        resources["generated_visuals"],
        resources["stock_footage"],
        resources["relevance_judge"],
    )
    chain, chain_key = scene_chain_for(dimension, engines)
    assert chain == ("diffusers",) and chain_key is not None and key in chain_key
    for scene in scenes:
        plan = scene.payload["plan"]
        assert scene.result["engine"] == "diffusers" and scene.result["relevance"]["passed"]
        expected = scene_hash(plan["visual_prompt"], plan["style"], SLUG, chain_key)
        assert scene.payload["scene_hash"] == expected

    # The stored clip is the provider's: generating the first scene again in this process
    # (pipelines already loaded: nothing more is loaded) gives the same bytes.
    first = min(scenes, key=lambda s: s.payload["scene_index"])
    loaded = loaded_count()
    again = tiny_visuals.generate(
        first.payload["scene_hash"],
        first.payload["plan"]["visual_prompt"],
        list(state.get_dimension(SLUG).config["palette"]),  # type: ignore[union-attr]
        CLIP_SECONDS,
        tmp_path / "again.mp4",
        engine="svd",
    )
    assert loaded_count() == loaded
    assert sha256_file(again) == first.result["sha256"]
    info = probe_media(str(again))
    assert (info.width, info.height, info.fps) == (540, 960, 24.0)
