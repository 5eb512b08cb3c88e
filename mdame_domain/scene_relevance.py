"""The scene_relevance check's rules: did each scene's picture pass the relevance gate?

A scene's result records the engine that made its clip (`engine`), the gate's judgement of it
(`relevance`, Judgement.to_json()), where it came from (`source`) and the candidates turned
down before it (`rejected`). What can be checked from that record:

- a scene of a judged engine (diffusers, generated, stock) needs a judgement the gate passed:
  verdict 'judged', `passed` true, and a score at or above the bar. The bar is the higher of
  the threshold it was judged against and the dimension's threshold now, so raising a
  dimension's threshold holds back the scenes not yet published that scored under it;
- a procedural clip shows no subject and is never judged: it passes only where the
  deployment makes scenes procedurally (the dimension's effective chain is procedural: the
  offline providers, or the local servers with no engine of the chain); in production it is a
  picture nobody checked. A result with no engine (a clip cached before results named their
  engine, which only the procedural stand-in's unchanged keys can still hit) counts as such.

Plain code: the check and the voice step's re-check (mdame_assets/gpu_defs/clips/checks.py)
read the scenes and call these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mdame_domain.relevance import JUDGED as JUDGED_VERDICT
from mdame_domain.relevance import passes
from mdame_domain.visuals_chain import JUDGED, PROCEDURAL

NO_VALUE = "–"
# A table cell's text at most (an author's name, a model's id).
CELL_MAX_CHARS = 80


@dataclass(frozen=True)
class SceneRelevance:
    """One scene's row of the check: what its result says, and why it fails (or None)."""

    script_id: int
    scene_index: int
    engine: str  # "" when the result names none
    score: float | None
    threshold: float | None  # the bar the scene was held to; None for an unjudged engine
    source: str
    rejected: int
    problem: str | None

    @property
    def passed(self) -> bool:
        return self.problem is None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def source_label(engine: str, source: Any) -> str:
    """Where a scene's picture came from, in a few words: stock footage's credit line, a
    generated still's image model, the diffusers engine, or the procedural generator."""
    if not isinstance(source, Mapping):
        return NO_VALUE
    if engine == "stock":
        text = source.get("attribution") or " ".join(
            str(source.get(k, "")) for k in ("source", "author") if source.get(k)
        )
    else:
        text = source.get("model") or source.get("generator") or ""
    return str(text).strip() or NO_VALUE


def relevance_problem(
    result: Mapping[str, Any], threshold: float, procedural_runs: bool
) -> str | None:
    """Why a ready scene's picture must not be published (see the module docstring), or None.
    `threshold`: the dimension's relevance threshold now; `procedural_runs`: whether this
    deployment makes the dimension's scenes procedurally."""
    engine = result.get("engine")
    if not engine or engine == PROCEDURAL:
        if procedural_runs:
            return None
        what = f"a {PROCEDURAL} clip" if engine else "a clip whose engine is not recorded"
        return f"{what}, and this deployment makes no scene procedurally: nobody judged it"
    if engine not in JUDGED:
        return f"engine {engine!r} is no visuals engine"
    judgement = result.get("relevance")
    if not isinstance(judgement, Mapping):
        return f"a {engine} clip without a relevance judgement"
    score = _number(judgement.get("score"))
    judged_at = _number(judgement.get("threshold"))
    if judgement.get("verdict", JUDGED_VERDICT) != JUDGED_VERDICT or score is None:
        return f"a {engine} clip the gate did not score ({judgement.get('verdict')})"
    bar = max(threshold, judged_at or 0.0)
    if judgement.get("passed") is not True or not passes(score, bar):
        return f"a {engine} clip scoring {score:.2f}, below the threshold {bar:.2f}"
    return None


def scene_relevance(
    script_id: int,
    scene_index: int,
    result: Mapping[str, Any],
    threshold: float,
    procedural_runs: bool,
) -> SceneRelevance:
    """A ready scene's row (see relevance_problem)."""
    engine = str(result.get("engine") or "")
    judgement = result.get("relevance")
    judgement = judgement if isinstance(judgement, Mapping) else {}
    score = _number(judgement.get("score"))
    judged_at = _number(judgement.get("threshold"))
    bar = max(threshold, judged_at or 0.0) if engine in JUDGED else None
    rejected = result.get("rejected")
    return SceneRelevance(
        script_id=script_id,
        scene_index=scene_index,
        engine=engine,
        score=score,
        threshold=bar,
        source=source_label(engine, result.get("source")),
        rejected=len(rejected) if isinstance(rejected, list) else 0,
        problem=relevance_problem(result, threshold, procedural_runs),
    )


def _cell(value: Any) -> str:
    """Table-safe text: one line, no column break, no markup of its own, and short."""
    text = " ".join(str(value).split())
    if len(text) > CELL_MAX_CHARS:
        text = text[: CELL_MAX_CHARS - 1] + "…"
    for char in ("\\", "|", "*", "_", "`", "<", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text or NO_VALUE


def _score(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.2f}"


def relevance_table(rows: Iterable[SceneRelevance]) -> str:
    """The check's Markdown table: one row per scene, in the order given."""
    lines = [
        "| script | scene | engine | score | threshold | source | rejected | verdict |",
        "|---:|---:|---|---:|---:|---|---:|---|",
    ]
    for row in rows:
        verdict = "pass" if row.problem is None else f"FAIL: {row.problem}"
        cells = [
            str(row.script_id),
            str(row.scene_index),
            _cell(row.engine or NO_VALUE),
            _score(row.score),
            _score(row.threshold),
            _cell(row.source),
            str(row.rejected),
            _cell(verdict) if row.problem is None else "**" + _cell(verdict) + "**",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def relevance_counts(rows: Iterable[SceneRelevance]) -> dict[str, Any]:
    """The check's numbers: scenes checked, failing, per engine, and candidates turned down."""
    rows = list(rows)
    engines: dict[str, int] = {}
    for row in rows:
        engines[row.engine or "unrecorded"] = engines.get(row.engine or "unrecorded", 0) + 1
    counts: dict[str, Any] = {
        "scenes_checked": len(rows),
        "scenes_failing": sum(not r.passed for r in rows),
        "scenes_by_engine": dict(sorted(engines.items())),
        "candidates_rejected": sum(r.rejected for r in rows),
    }
    scores = [r.score for r in rows if r.score is not None]
    if scores:
        counts["lowest_score"] = round(min(scores), 3)
    return counts
