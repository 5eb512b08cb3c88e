"""What a video's pictures cost on each visuals chain, from the code's own prices and defaults:
the image model's price per image (mdame_domain.generated_stills), the relevance judge's price
per token (mdame_domain.paid_calls) and what the paid-call path reserves for one judgement
(its prompt estimated as mdame_resources/providers/gemini/paid.py estimates it, every keyframe
at IMAGE_TOKENS_ESTIMATE tokens, every output token max_output_tokens allows), and the stock
searches a scene may send (mdame_domain.scenes.search_queries, Pexels then Pixabay).

docs/capacity.md carries the table this prints; tests/unit/test_visuals_cost.py fails when the
two drift apart (a price, a default or a cap changed), so the doc is recomputed, never edited
by hand:

    PYTHONPATH=. .venv/bin/python -m bench.visuals_cost

No network, no database: arithmetic only. A judgement here is its reservation, the most the
budget settles it at: the judge's actual answer (a score and a sentence) uses fewer output
tokens unless the model thinks up to the cap, which max_output_tokens bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdame_domain.generated_stills import GeneratedSettings
from mdame_domain.paid_calls import MICROS_PER_USD, cost_micros, estimate_micros, price_for
from mdame_domain.relevance import (
    IMAGE_TOKENS_ESTIMATE,
    SYSTEM_INSTRUCTION,
    RelevanceSettings,
    relevance_request,
)
from mdame_domain.scenes import MAX_SEARCH_QUERIES

# A scene count the renders see often (capacity.md's "about 6 clips"), and the most a video has
# (the scenes check's MAX_SCENES, plan_scenes' max_scenes).
TYPICAL_SCENES = 6
MAX_SCENES = 10
# A long scene's narration (about 50 words, 20 s spoken): the prompt's share of a judgement is
# small either way.
NARRATION_CHARS = 300
SOURCES = 2  # Pexels, then Pixabay


def judgement_micros(settings: RelevanceSettings | None = None) -> int:
    """What the paid-call path reserves for one judgement (and the most it settles it at)."""
    chosen = settings or RelevanceSettings()
    price = price_for(chosen.model)
    contents = relevance_request("x" * NARRATION_CHARS)
    text = estimate_micros(price, f"{SYSTEM_INSTRUCTION}\n{contents}", chosen.max_output_tokens)
    return text + cost_micros(price, IMAGE_TOKENS_ESTIMATE * chosen.keyframes, 0, 0)


@dataclass(frozen=True)
class SceneCost:
    """One scene on one chain: paid images, paid judgements, stock searches (free, rate
    limited) and what the paid calls cost, in micro-dollars."""

    images: int
    judgements: int
    searches: int
    micros: int


def scene_cost(
    engine: str,
    candidates: int,
    generated: GeneratedSettings | None = None,
    relevance: RelevanceSettings | None = None,
) -> SceneCost:
    """A scene whose picture took `candidates` judged candidates of `engine` (the last one
    passing, or every one rejected at the cap). Stock: one search when the first candidate
    passes (a search answers 15 videos, so a few rejections rarely need another); past the
    first, the worst: every query of the scene on both sources."""
    judge = judgement_micros(relevance)
    if engine == "generated":
        image = (generated or GeneratedSettings()).price_micros
        return SceneCost(candidates, candidates, 0, candidates * (image + judge))
    if engine == "stock":
        searches = 1 if candidates == 1 else MAX_SEARCH_QUERIES * SOURCES
        return SceneCost(0, candidates, searches, candidates * judge)
    if engine == "diffusers":  # GPU seconds, not money: see capacity.md
        return SceneCost(0, candidates, 0, candidates * judge)
    raise ValueError(f"unknown engine {engine!r}")


def usd(micros: int) -> str:
    return f"${micros / MICROS_PER_USD:.4f}"


def table() -> str:
    """The Markdown table docs/capacity.md carries: per chain, a typical video (every scene's
    first candidate passes) and the worst (every scene judges max_candidates candidates)."""
    cap = RelevanceSettings().max_candidates
    rows = [
        "| Chain's engine | Per scene, first candidate passes | Per scene, "
        f"{cap} candidates (the cap) | Video of {TYPICAL_SCENES} scenes, typical | "
        f"Video of {MAX_SCENES} scenes, worst |",
        "|---|---|---|---|---|",
    ]
    for engine in ("generated", "stock", "diffusers"):
        one, worst = scene_cost(engine, 1), scene_cost(engine, cap)
        rows.append(
            f"| {engine} | {_cell(one)} | {_cell(worst)} | "
            f"{_cell(one, TYPICAL_SCENES)} | {_cell(worst, MAX_SCENES)} |"
        )
    return "\n".join(rows)


def _cell(cost: SceneCost, scenes: int = 1) -> str:
    counts = (
        (cost.images, "image"),
        (cost.judgements, "judgement"),
        (cost.searches, "search"),
    )
    parts = [_count(n * scenes, word) for n, word in counts if n]
    return f"{usd(cost.micros * scenes)} ({', '.join(parts)})"


def _count(n: int, word: str) -> str:
    plural = "es" if word.endswith("h") else "s"
    return f"{n} {word}" if n == 1 else f"{n} {word}{plural}"


def main() -> None:
    settings = RelevanceSettings()
    print(
        f"image: {usd(GeneratedSettings().price_micros)} ({GeneratedSettings().model}); "
        f"judgement: {usd(judgement_micros())} reserved ({settings.model}, "
        f"{settings.keyframes} keyframes x {IMAGE_TOKENS_ESTIMATE} tokens, "
        f"{settings.max_output_tokens} output tokens)"
    )
    print(table())


if __name__ == "__main__":
    main()
