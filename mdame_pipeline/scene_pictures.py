"""A scene's picture from its visuals chain (mdame_domain.visuals_chain), as a scene step makes it.

Each engine of the chain offers candidates in turn: diffusers and procedural one clip, the
`generated` engine a still per candidate (each a paid call of its own), `stock` the footage its
searches find. Every candidate of a judged engine goes to the relevance gate with the scene's
narration; the first that passes is the scene's picture. Each judged engine gets an even share
of the gate's per-scene cap, so a chain always reaches its next engine; a scene that nothing
passes raises NoPicture with every candidate's reason, and its script is rejected.

The paid calls (stills and judgements) are fenced by the scene's visuals lock, which the caller
holds (mdame_pipeline.clip_worker); their work keys name the scene hash and the candidate, so a
rerun after a crash finds what was paid for instead of paying again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdame_domain.dimensions import DimensionConfig
from mdame_domain.media_store import MediaStore
from mdame_domain.relevance import BLOCKED, UNUSABLE, Judgement, SceneGate
from mdame_domain.visuals_chain import (
    DIFFUSERS,
    GENERATED,
    JUDGED,
    PROCEDURAL,
    STOCK,
    candidate_label,
    chain_key,
    effective_chain,
)
from mdame_resources.providers.budget import CallContext
from mdame_resources.providers.gemini import ModelBlocked, PaidCallFailed, PaidCallTransient
from mdame_resources.providers.generated_visuals import GeneratedVisuals
from mdame_resources.providers.relevance import GeminiRelevanceJudge
from mdame_resources.providers.stock import NoStockFootage, StockClip, StockFootage
from mdame_resources.providers.visuals import VisualsResource


@dataclass(frozen=True)
class SceneEngines:
    """The providers a scene step makes pictures with (the Dagster resources of its op)."""

    visuals: VisualsResource
    generated: GeneratedVisuals
    stock: StockFootage
    judge: GeminiRelevanceJudge


@dataclass(frozen=True)
class SceneRequest:
    """One scene's job, as the chain reads it."""

    scene_hash: str
    prompt: str
    palette: list[str]
    duration_s: float
    engines: tuple[str, ...]
    narration: str
    queries: list[str]

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> SceneRequest:
        chain = payload["chain"]
        return cls(
            scene_hash=str(payload["scene_hash"]),
            prompt=str(payload["prompt"]),
            palette=list(payload["palette"]),
            duration_s=float(payload["duration_s"]),
            engines=tuple(chain["engines"]),
            narration=str(chain["narration"]),
            queries=list(chain["queries"]),
        )


@dataclass(frozen=True)
class Picture:
    """The clip that won, and what the scene records of it (engine, relevance, source and the
    reasons the candidates before it were rejected)."""

    path: Path
    detail: dict[str, Any]


class NoPicture(Exception):
    """No candidate of any engine of the chain passed the relevance gate."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__(
            "no picture passed the relevance gate: " + ("; ".join(reasons) or "no candidate")
        )


def scene_chain_for(
    dimension: DimensionConfig, engines: SceneEngines
) -> tuple[tuple[str, ...], str | None]:
    """The engines a scene of `dimension` is made with here, and what of them goes into its
    scene hash (ChainError when none runs here)."""
    visuals = dimension.visuals
    chain = effective_chain(visuals.chain, engines.visuals.offers)
    keys: dict[str, str | None] = {}
    for engine in chain:
        if engine in (DIFFUSERS, PROCEDURAL):
            keys[engine] = engines.visuals.cache_key(visuals.engine)
        elif engine == GENERATED:
            keys[engine] = engines.generated.cache_key(settings=visuals.generated)
        elif engine == STOCK:
            keys[engine] = engines.stock.cache_key()
    gate = visuals.relevance
    judge_key = f"{gate.model}:{gate.threshold}:{gate.keyframes}x{gate.keyframe_height}"
    return chain, chain_key(keys, judge_key)


def make_picture(
    request: SceneRequest,
    out: Path,
    *,
    engines: SceneEngines,
    dimension: DimensionConfig,
    ctx: CallContext,
    store: MediaStore,
) -> Picture:
    """The scene's clip at `out` from the first engine of the chain whose candidate passes the
    gate (see the module docstring). Waits (NotYet), transient and permanent provider failures
    propagate as their providers raise them; NoPicture when nothing passed."""
    run = _ChainRun(request, out, engines, dimension, ctx, store)
    cap = dimension.visuals.relevance.max_candidates
    judged = [e for e in request.engines if e in JUDGED]
    share = max(1, math.ceil(cap / max(1, len(judged))))
    for engine in request.engines:
        if engine == PROCEDURAL:
            return run.procedural()
        budget = min(share, cap - len(run.gate.judged))
        if budget <= 0:
            break
        picture = run.engine(engine, budget)
        if picture is not None:
            return picture
    raise NoPicture([*run.gate.reasons(), *run.notes])


class _ChainRun:
    """One scene's way through its chain: the gate's record of every candidate judged."""

    def __init__(
        self,
        request: SceneRequest,
        out: Path,
        engines: SceneEngines,
        dimension: DimensionConfig,
        ctx: CallContext,
        store: MediaStore,
    ) -> None:
        self.request, self.out, self.engines = request, out, engines
        self.visuals, self.ctx, self.store = dimension.visuals, ctx, store
        self.gate = SceneGate(self.visuals.relevance.max_candidates)
        self.notes: list[str] = []

    def judge(self, path: Path, label: str) -> Judgement:
        judgement = self.engines.judge.judge(
            path,
            self.request.narration,
            scene_key=self.request.scene_hash,
            ctx=self.ctx,
            settings=self.visuals.relevance,
            duration_s=self.request.duration_s,
        )
        self.gate.add(label, judgement)
        return judgement

    def won(self, engine: str, label: str, judgement: Judgement | None, source: Any) -> Picture:
        detail: dict[str, Any] = {"engine": engine, "candidate": label, "source": source}
        if judgement is not None:
            detail["relevance"] = judgement.to_json()
        rejected = list(self.gate.reasons())
        if rejected:
            detail["rejected"] = rejected
        return Picture(self.out, detail)

    def procedural(self) -> Picture:
        r = self.request
        self.engines.visuals.generate(r.scene_hash, r.prompt, r.palette, r.duration_s, self.out)
        return self.won(
            PROCEDURAL, candidate_label(PROCEDURAL, 0), None, {"generator": "procedural"}
        )

    def engine(self, engine: str, budget: int) -> Picture | None:
        """Up to `budget` candidates of one judged engine; the first that passes, else None."""
        if engine == DIFFUSERS:
            return self.diffusers()
        if engine == GENERATED:
            return self.generated(budget)
        if engine == STOCK:
            return self.stock(budget)
        raise ValueError(f"unknown visuals engine {engine!r}")

    def diffusers(self) -> Picture | None:
        r, label = self.request, candidate_label(DIFFUSERS, 0)
        self.engines.visuals.generate(
            r.scene_hash, r.prompt, r.palette, r.duration_s, self.out, engine=self.visuals.engine
        )
        judgement = self.judge(self.out, label)
        if judgement.passed:
            return self.won(DIFFUSERS, label, judgement, {"model": self.visuals.engine})
        self.out.unlink(missing_ok=True)
        return None

    def generated(self, budget: int) -> Picture | None:
        r = self.request
        for candidate in range(budget):
            label = candidate_label(GENERATED, candidate)
            try:
                clip = self.engines.generated.generate_clip(
                    r.scene_hash, r.prompt, r.duration_s, self.out,
                    ctx=self.ctx, store=self.store, candidate=candidate,
                    settings=self.visuals.generated,
                )  # fmt: skip
            except PaidCallTransient:
                raise
            except (ModelBlocked, PaidCallFailed) as exc:
                # A still the model would not make (a safety block, answers without an image)
                # is a candidate rejected, paid for like any other.
                verdict = BLOCKED if isinstance(exc, ModelBlocked) else UNUSABLE
                threshold = self.visuals.relevance.threshold
                self.gate.add(label, Judgement(0.0, str(exc)[:300], threshold, verdict))
                continue
            judgement = self.judge(self.out, label)
            if judgement.passed:
                source = {"model": clip.still.model, "still_uri": clip.still.uri,
                          "motion": clip.motion}  # fmt: skip
                return self.won(GENERATED, label, judgement, source)
            self.out.unlink(missing_ok=True)
        return None

    def stock(self, budget: int) -> Picture | None:
        verdicts: dict[str, Judgement] = {}

        def accept(clip: StockClip) -> bool:
            label = candidate_label(STOCK, clip.candidate.key)
            verdicts[label] = self.judge(clip.path, label)
            return verdicts[label].passed

        r = self.request
        try:
            with self.engines.stock.client() as client:
                footage = client.clip_for_scene(
                    r.queries, r.duration_s, self.out, accept=accept, max_candidates=budget
                )
        except NoStockFootage as none:
            for tried in none.tried:
                if tried.get("outcome") == "refused":
                    self.gate_note(f"{candidate_label(STOCK, tried['key'])}: {tried['reason']}")
            if not none.tried and not verdicts:
                self.gate_note(f"{STOCK}: {none}")
            return None
        label = candidate_label(STOCK, footage.clip.candidate.key)
        return self.won(STOCK, label, verdicts[label], footage.clip.provenance())

    def gate_note(self, reason: str) -> None:
        """Why an engine offered no candidate to judge (nothing found, a download refused):
        part of the reasons a rejected script carries, without using the gate's cap."""
        self.notes.append(reason)
