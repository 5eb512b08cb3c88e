"""docs/capacity.md's cost per video of each visuals chain is bench/visuals_cost.py's table,
computed from the code's prices and defaults: a price, a default or a cap that changes without
the doc being recomputed fails here."""

from __future__ import annotations

from bench.visuals_cost import judgement_micros, scene_cost, table
from mdame_core.settings import REPO_ROOT
from mdame_domain.generated_stills import GeneratedSettings
from mdame_domain.relevance import RelevanceSettings


def test_the_capacity_doc_carries_the_table_the_code_computes() -> None:
    doc = (REPO_ROOT / "docs" / "capacity.md").read_text()
    assert table() in doc, "docs/capacity.md drifted: paste `python -m bench.visuals_cost`"


def test_a_scene_pays_an_image_and_a_judgement_per_generated_candidate() -> None:
    judge = judgement_micros()
    image = GeneratedSettings().price_micros
    cap = RelevanceSettings().max_candidates
    assert scene_cost("generated", cap).micros == cap * (image + judge)
    assert scene_cost("stock", 1).micros == judge and scene_cost("stock", 1).images == 0
    # A cheaper judge with one keyframe costs less than the default's reservation.
    one_frame = RelevanceSettings(keyframes=1)
    assert judgement_micros(one_frame) < judge
