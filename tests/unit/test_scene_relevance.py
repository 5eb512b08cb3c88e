"""The scene_relevance check's rules (mdame_domain.scene_relevance): which scene results pass,
the bar they are held to, and the table the UI shows."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mdame_domain.relevance import BLOCKED, Judgement
from mdame_domain.scene_relevance import (
    relevance_counts,
    relevance_problem,
    relevance_table,
    scene_relevance,
    source_label,
)

PEXELS = {
    "source": "pexels",
    "id": "123",
    "author": "Ann | Lee",
    "page_url": "https://www.pexels.com/video/123/",
    "attribution": "Video by Ann | Lee on Pexels: https://www.pexels.com/video/123/",
}


def _result(engine: str | None, score: float | None = 0.92, threshold: float = 0.6, **more: Any):
    result: dict[str, Any] = {"uri": "media://clip", "sha256": "ab" * 32, **more}
    if engine is not None:
        result["engine"] = engine
    if score is not None:
        result["relevance"] = Judgement(score, "shows a comet", threshold, model="m").to_json()
    return result


@pytest.mark.parametrize("engine", ["generated", "stock", "diffusers"])
def test_a_judged_engine_passes_with_a_passing_judgement_only(engine):
    assert relevance_problem(_result(engine), 0.6, procedural_runs=False) is None
    assert relevance_problem(_result(engine, score=0.6), 0.6, procedural_runs=True) is None

    assert "without a relevance judgement" in relevance_problem(
        _result(engine, score=None), 0.6, procedural_runs=True
    )
    below = relevance_problem(_result(engine, score=0.4), 0.6, procedural_runs=True)
    assert below == f"a {engine} clip scoring 0.40, below the threshold 0.60"


def test_the_bar_is_the_higher_of_the_recorded_and_the_dimensions_threshold():
    # Raised since the clip was judged: held to the new bar.
    assert "below the threshold 0.95" in relevance_problem(
        _result("generated"), 0.95, procedural_runs=False
    )
    # Judged against a higher one than the dimension's now: its own bar still holds.
    judged_high = _result("generated", score=0.7, threshold=0.8)
    assert "below the threshold 0.80" in relevance_problem(judged_high, 0.6, False)


def test_a_judgement_that_says_it_passed_but_did_not_or_was_not_scored_fails():
    lying = _result("stock", score=0.3)
    lying["relevance"]["passed"] = True
    assert "scoring 0.30" in relevance_problem(lying, 0.6, False)
    unpassed = _result("stock", score=0.9)
    unpassed["relevance"]["passed"] = False
    assert "scoring 0.90" in relevance_problem(unpassed, 0.6, False)
    blocked = _result("generated")
    blocked["relevance"] = Judgement(0.0, "safety", 0.6, BLOCKED).to_json()
    assert "did not score (blocked)" in relevance_problem(blocked, 0.6, False)


def test_a_procedural_or_unrecorded_clip_passes_only_where_scenes_are_made_procedurally():
    for result in (_result("procedural", score=None), _result(None, score=None)):
        assert relevance_problem(result, 0.6, procedural_runs=True) is None
        assert "nobody judged it" in relevance_problem(result, 0.6, procedural_runs=False)
    assert "is no visuals engine" in relevance_problem(_result("paint"), 0.6, True)


def test_the_source_names_the_credit_or_the_model():
    assert source_label("stock", PEXELS) == PEXELS["attribution"]
    assert source_label("stock", {"source": "pixabay", "author": "Bo"}) == "pixabay Bo"
    assert source_label("generated", {"model": "gemini-2.5-flash-image"}) == (
        "gemini-2.5-flash-image"
    )
    assert source_label("procedural", {"generator": "procedural"}) == "procedural"
    assert source_label("generated", None) == "–"


def test_the_table_has_a_row_per_scene_and_cells_that_cannot_break_it():
    rows = [
        scene_relevance(7, 0, _result("stock", source=PEXELS, rejected=["a", "b"]), 0.6, False),
        scene_relevance(7, 1, _result("procedural", score=None), 0.6, False),
        scene_relevance(7, 2, _result("generated", source={"model": "img"}), 0.6, False),
    ]

    table = relevance_table(rows).splitlines()

    assert len(table) == 2 + 3
    # Nine column breaks on every line: an author's "|" is escaped.
    assert all(len(re.findall(r"(?<!\\)\|", line)) == 9 for line in table), table
    stock, procedural, generated = table[2:]
    assert stock.startswith("| 7 | 0 | stock | 0.92 | 0.60 | Video by Ann \\| Lee on Pexels")
    assert stock.endswith("| 2 | pass |")
    assert "| 7 | 1 | procedural | – | – |" in procedural and "**FAIL: a procedural" in procedural
    assert generated.startswith("| 7 | 2 | generated | 0.92 | 0.60 | img | 0 | pass")
    assert relevance_counts(rows) == {
        "scenes_checked": 3,
        "scenes_failing": 1,
        "scenes_by_engine": {"generated": 1, "procedural": 1, "stock": 1},
        "candidates_rejected": 2,
        "lowest_score": 0.92,
    }
