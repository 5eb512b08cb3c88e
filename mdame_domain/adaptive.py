"""The Adaptive Engine: bounded weekly tuning of a dimension's
parameters from its Strategic Auditor metrics. Pure functions, no I/O.

Four parameters are tuned, each inside the dimension YAML's hard limits (`adaptive:` block) and
moved at most one weekly step per week:
  hook_threshold     the scripts stage's hook audit; always inside [0.70, 0.80] as well
  videos_per_day     the topics stage's video slots
  trend_volume_gate  the trends stage's minimum number of trends a day needs
  category_weights   {topic category: weight}: a trend's score is multiplied by its category's
                     weight when topics are ranked; learned from views per video per category
The current parameter set is stored versioned in PostgreSQL (mdame.param_sets); a day's run reads
`tuned_params(config, stored)`, which falls back to the YAML for anything not stored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mdame_domain.audit import category_of

# The engine never sets a hook threshold outside this, whatever a YAML allows.
HOOK_BOUNDS = (0.70, 0.80)
DEFAULT_TREND_VOLUME_GATE = 3  # the trends stage's minimum when the YAML sets none
DEFAULT_WEIGHT = 1.0
MAX_CATEGORIES = 200
CATEGORY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9 _-]{0,79}$")  # as apply_param_set checks it
# Rounding of tuned floats; the database allows this much slack on a weekly step.
STEP_SLACK = 1e-6

# Rule thresholds: what a week's metrics must show before a parameter moves.
MIN_HOOK_SAMPLES = 3
HOOK_PASS_LOW, HOOK_PASS_HIGH = 0.50, 0.90
HOOK_HEADROOM = 0.05  # p50 this far above the threshold: raise it
VIEWS_UP, VIEWS_DOWN, VIEWS_FALLING = 0.10, -0.20, -0.10
FAILURE_HIGH, FAILURE_LOW = 0.30, 0.10
HALT_HIGH, HALT_LOW = 0.20, 0.05
TRENDS_FAILING = 0.25
VOLUME_HEADROOM = 3.0  # daily candidates this many times the gate: raise it
MIN_CATEGORY_VIDEOS = 2
SMOOTHING_VIDEOS = 3.0  # prior strength: a category's views are shrunk toward the mean


class AdaptiveConfigError(ValueError):
    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"{field_name}: {reason}")
        self.field, self.reason = field_name, reason


@dataclass(frozen=True)
class AdaptiveLimits:
    """The YAML's hard limits (inclusive) and the largest move per week of each parameter.
    Registered with the dimension's config (asdict), where apply_param_set reads them."""

    enabled: bool = True
    hook_threshold: tuple[float, float] = HOOK_BOUNDS
    videos_per_day: tuple[int, int] = (1, 3)
    trend_volume_gate: tuple[int, int] = (1, 10)
    category_weight: tuple[float, float] = (0.5, 2.0)
    step_hook_threshold: float = 0.01
    step_videos_per_day: int = 1
    step_trend_volume_gate: int = 1
    step_category_weight: float = 0.1


@dataclass(frozen=True)
class TunedParams:
    """What a day's run reads: the current parameter set over the YAML's values."""

    hook_threshold: float
    videos_per_day: int
    trend_volume_gate: int
    category_weights: Mapping[str, float] = field(default_factory=dict)
    version: int = 0  # 0: no stored set, the YAML's values

    def weight(self, category: str) -> float:
        return float(self.category_weights.get(category, DEFAULT_WEIGHT))

    def to_json(self) -> dict[str, Any]:
        return {
            "hook_threshold": self.hook_threshold,
            "videos_per_day": self.videos_per_day,
            "trend_volume_gate": self.trend_volume_gate,
            "category_weights": dict(sorted(self.category_weights.items())),
        }


@dataclass(frozen=True)
class Change:
    name: str  # hook_threshold | videos_per_day | trend_volume_gate | category_weights
    old: Any
    new: Any
    explanation: str


# --- the YAML block --------------------------------------------------------------------------


def parse_adaptive(raw: Any, videos_per_day: int, trend_volume_gate: int) -> AdaptiveLimits:
    """The `adaptive:` mapping of a dimension file; AdaptiveConfigError names the bad field.

    Defaults: hook_threshold [0.70, 0.80]; videos_per_day [1, max(3, the YAML's)];
    trend_volume_gate [1, max(10, the YAML's)]; category_weight [0.5, 2.0]; weekly_step
    {hook_threshold: 0.01, videos_per_day: 1, trend_volume_gate: 1, category_weight: 0.1}."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise AdaptiveConfigError("adaptive", "expected a mapping")
    known = {
        "enabled",
        "hook_threshold",
        "videos_per_day",
        "trend_volume_gate",
        "category_weight",
        "weekly_step",
    }
    unknown = set(raw) - known
    if unknown:
        raise AdaptiveConfigError("adaptive", f"unknown keys {sorted(map(str, unknown))}")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise AdaptiveConfigError("adaptive.enabled", "expected true or false")
    hook = _pair(raw, "hook_threshold", HOOK_BOUNDS, float, HOOK_BOUNDS)
    videos = _pair(raw, "videos_per_day", (1, max(3, videos_per_day)), int, (1, 10))
    if not videos[0] <= videos_per_day <= videos[1]:
        raise AdaptiveConfigError(
            "adaptive.videos_per_day", f"must contain videos_per_day ({videos_per_day})"
        )
    gate = _pair(raw, "trend_volume_gate", (1, max(10, trend_volume_gate)), int, (0, 50))
    if not gate[0] <= trend_volume_gate <= gate[1]:
        raise AdaptiveConfigError(
            "adaptive.trend_volume_gate", f"must contain trend_volume_gate ({trend_volume_gate})"
        )
    weight = _pair(raw, "category_weight", (0.5, 2.0), float, (0.05, 10.0))
    if not weight[0] <= DEFAULT_WEIGHT <= weight[1]:
        raise AdaptiveConfigError("adaptive.category_weight", "must contain 1.0")
    steps = raw.get("weekly_step", {})
    if not isinstance(steps, Mapping):
        raise AdaptiveConfigError("adaptive.weekly_step", "expected a mapping")
    unknown = set(steps) - {
        "hook_threshold",
        "videos_per_day",
        "trend_volume_gate",
        "category_weight",
    }
    if unknown:
        raise AdaptiveConfigError(
            "adaptive.weekly_step", f"unknown keys {sorted(map(str, unknown))}"
        )
    return AdaptiveLimits(
        enabled=enabled,
        hook_threshold=(float(hook[0]), float(hook[1])),
        videos_per_day=(int(videos[0]), int(videos[1])),
        trend_volume_gate=(int(gate[0]), int(gate[1])),
        category_weight=(float(weight[0]), float(weight[1])),
        step_hook_threshold=float(_step(steps, "hook_threshold", 0.01, float, 0.05)),
        step_videos_per_day=int(_step(steps, "videos_per_day", 1, int, 3)),
        step_trend_volume_gate=int(_step(steps, "trend_volume_gate", 1, int, 5)),
        step_category_weight=float(_step(steps, "category_weight", 0.1, float, 1.0)),
    )


def _number(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind is int else isinstance(value, int | float)


def _pair(
    raw: Mapping[str, Any], name: str, default: tuple[Any, Any], kind: type, within: tuple[Any, Any]
) -> tuple[Any, Any]:
    value = raw.get(name)
    if value is None:
        return default
    where = f"adaptive.{name}"
    kind_name = "whole numbers" if kind is int else "numbers"
    if not isinstance(value, Mapping) or set(value) != {"min", "max"}:
        raise AdaptiveConfigError(where, f"expected {{min: N, max: N}} ({kind_name})")
    low, high = value["min"], value["max"]
    if not (_number(low, kind) and _number(high, kind)) or not math.isfinite(low + high):
        raise AdaptiveConfigError(where, f"min and max must be {kind_name}")
    if not within[0] <= low <= high <= within[1]:
        raise AdaptiveConfigError(
            where, f"needs {within[0]} <= min <= max <= {within[1]} (got {low}, {high})"
        )
    return low, high


def _step(raw: Mapping[str, Any], name: str, default: Any, kind: type, most: Any) -> Any:
    value = raw.get(name, default)
    if not _number(value, kind) or not 0 <= value <= most:
        kind_name = "a whole number" if kind is int else "a number"
        raise AdaptiveConfigError(
            f"adaptive.weekly_step.{name}", f"expected {kind_name} in [0, {most}]"
        )
    return value


# --- what a day's run reads ------------------------------------------------------------------


def tuned_params(
    hook_threshold: float,
    videos_per_day: int,
    trend_volume_gate: int,
    limits: AdaptiveLimits,
    stored: Mapping[str, Any] | None,
    version: int = 0,
) -> TunedParams:
    """The YAML's values (first three arguments) overlaid by a stored set's. A stored value is
    clamped to the YAML's current limits (the file may have been tightened since it was
    written); one of the wrong type is ignored. With nothing stored, the YAML's values stand."""
    values: Mapping[str, Any] = stored or {}
    hook, videos, gate = hook_threshold, videos_per_day, trend_volume_gate
    weights: dict[str, float] = {}
    low, high = hook_limits(limits)
    value: Any = values.get("hook_threshold")
    if _number(value, float) and math.isfinite(value):
        hook = _clamp(float(value), low, high)
    value = values.get("videos_per_day")
    if _number(value, int):
        videos = int(_clamp(value, *limits.videos_per_day))
    value = values.get("trend_volume_gate")
    if _number(value, int):
        gate = int(_clamp(value, *limits.trend_volume_gate))
    raw_weights = values.get("category_weights")
    if isinstance(raw_weights, Mapping):
        for category, weight in raw_weights.items():
            if isinstance(category, str) and _number(weight, float) and math.isfinite(weight):
                weights[category] = _clamp(float(weight), *limits.category_weight)
    return TunedParams(hook, videos, gate, weights, version if values else 0)


def hook_limits(limits: AdaptiveLimits) -> tuple[float, float]:
    """The YAML's hook threshold limits inside [0.70, 0.80]."""
    return max(limits.hook_threshold[0], HOOK_BOUNDS[0]), min(
        limits.hook_threshold[1], HOOK_BOUNDS[1]
    )


def topic_category(keywords: Sequence[str]) -> str:
    """A topic's category, exactly as the Strategic Auditor groups `category_views`
    (mdame_domain.audit.category_of: the first dimension keyword its trend matched, lowercased;
    'other' when none), so a learned weight applies to the topics it was learned from."""
    return category_of(keywords)


def _clamp(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


# --- the engine ------------------------------------------------------------------------------


def propose_changes(
    metrics: Mapping[str, Any], current: TunedParams, limits: AdaptiveLimits
) -> list[Change]:
    """The week's changes, each with its explanation; [] when the metrics call for none.

    Every new value lies inside the limits (and the hook threshold inside [0.70, 0.80]) and at
    most one weekly step from the current value, whatever the metrics hold (missing, None or
    malformed entries count as no signal). A current value outside the limits (a YAML value
    from before the limits) is brought to the nearest limit."""
    if not limits.enabled:
        return []
    changes = [
        _hook_change(metrics, current, limits),
        _videos_change(metrics, current, limits),
        _gate_change(metrics, current, limits),
        _weights_change(metrics, current, limits),
    ]
    return [c for c in changes if c is not None]


def apply_changes(current: TunedParams, changes: Sequence[Change]) -> dict[str, Any]:
    """The full parameter set after `changes`, as stored by apply_param_set."""
    params = current.to_json()
    for change in changes:
        params[change.name] = change.new
    return params


def _num(value: Any) -> float | None:
    if _number(value, float) and math.isfinite(value):
        return float(value)
    return None


def _get(metrics: Mapping[str, Any], *path: str) -> Any:
    value: Any = metrics
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _moved(current: float, target: float, step: float, low: float, high: float) -> float:
    """current moved toward target by at most step, then kept inside [low, high]."""
    delta = _clamp(target - current, -step, step)
    return _clamp(round(current + delta, 6), low, high)


def _next_value(
    cur: float, target: float, step: float, limits: tuple[float, float], why: str, shown: str
) -> tuple[float, str]:
    """The week's value: brought inside the limits first (a YAML tightened since), else moved
    toward the target by at most one step; with the reason."""
    low, high = limits
    if not low <= cur <= high:
        return _clamp(cur, low, high), why or f"{shown} is outside the limits [{low}, {high}]"
    return _moved(cur, target, step, low, high), why


def _failure_rate(metrics: Mapping[str, Any]) -> float:
    rates = _get(metrics, "stage_failure_rate")
    if not isinstance(rates, Mapping):
        return 0.0
    values = [v for v in (_num(r) for r in rates.values()) if v is not None]
    return max(values, default=0.0)


def _hook_change(
    metrics: Mapping[str, Any], current: TunedParams, limits: AdaptiveLimits
) -> Change | None:
    low, high = hook_limits(limits)
    step = limits.step_hook_threshold
    cur = current.hook_threshold
    n = _num(_get(metrics, "hook_scores", "n")) or 0.0
    rate = _num(_get(metrics, "hook_pass_rate"))
    p50 = _num(_get(metrics, "hook_scores", "p50"))
    trend = _num(_get(metrics, "views_trend"))
    target, why = cur, ""
    if n >= MIN_HOOK_SAMPLES and rate is not None:
        if rate < HOOK_PASS_LOW:
            target = cur - step
            why = f"only {rate:.0%} of {n:.0f} hooks passed: the threshold rejects too many topics"
        elif rate >= HOOK_PASS_HIGH and p50 is not None and p50 >= cur + HOOK_HEADROOM:
            target = p50 - HOOK_HEADROOM
            why = (
                f"{rate:.0%} of hooks passed with median {p50:.2f}: room to ask for stronger hooks"
            )
        elif trend is not None and trend <= VIEWS_FALLING and rate >= 0.7:
            target = cur + step
            why = (
                f"views per video fell {trend:+.0%} while hooks pass easily: ask for stronger hooks"
            )
    new, why = _next_value(cur, target, step, (low, high), why, f"{cur:.3f}")
    if abs(new - cur) < 1e-9:
        return None
    return Change("hook_threshold", cur, new, f"hook threshold {cur:.3f} -> {new:.3f}: {why}")


def _videos_change(
    metrics: Mapping[str, Any], current: TunedParams, limits: AdaptiveLimits
) -> Change | None:
    low, high = limits.videos_per_day
    cur, step = current.videos_per_day, limits.step_videos_per_day
    failure = _failure_rate(metrics)
    halt = _num(_get(metrics, "halt_rate")) or 0.0
    trend = _num(_get(metrics, "views_trend"))
    target, why = cur, ""
    if failure >= FAILURE_HIGH or halt >= HALT_HIGH:
        target = cur - step
        why = f"stage failure rate {failure:.0%}, HALT rate {halt:.0%}: make fewer videos"
    elif trend is not None and trend >= VIEWS_UP and failure < FAILURE_LOW and halt < HALT_LOW:
        target = cur + step
        why = f"views per video up {trend:+.0%} with a healthy pipeline: make one more a day"
    elif trend is not None and trend <= VIEWS_DOWN:
        target = cur - step
        why = f"views per video down {trend:+.0%}: make fewer, better videos"
    moved, why = _next_value(cur, target, step, (low, high), why, f"{cur}")
    new = int(moved)
    if new == cur:
        return None
    return Change("videos_per_day", cur, new, f"videos per day {cur} -> {new}: {why}")


def _gate_change(
    metrics: Mapping[str, Any], current: TunedParams, limits: AdaptiveLimits
) -> Change | None:
    low, high = limits.trend_volume_gate
    cur, step = current.trend_volume_gate, limits.step_trend_volume_gate
    candidates = _num(_get(metrics, "trend_volume", "candidates"))
    trends_failed = _num(_get(metrics, "stage_failure_rate", "trends")) or 0.0
    target, why = cur, ""
    if trends_failed >= TRENDS_FAILING:
        target = cur - step
        why = f"the trends stage failed {trends_failed:.0%} of runs: the gate starves the pipeline"
    elif (
        candidates is not None
        and trends_failed == 0
        and candidates / 7 >= VOLUME_HEADROOM * max(cur, 1)
    ):
        target = cur + step
        why = f"{candidates / 7:.0f} trend candidates a day: require more before a day runs"
    moved, why = _next_value(cur, target, step, (low, high), why, f"{cur}")
    new = int(moved)
    if new == cur:
        return None
    return Change("trend_volume_gate", cur, new, f"trend volume gate {cur} -> {new}: {why}")


def _weights_change(
    metrics: Mapping[str, Any], current: TunedParams, limits: AdaptiveLimits
) -> Change | None:
    low, high = limits.category_weight
    step = limits.step_category_weight
    raw = _get(metrics, "category_views")
    seen: dict[str, tuple[float, float]] = {}
    if isinstance(raw, Mapping):
        for category, row in raw.items():
            videos = _num(_get(row, "videos")) if isinstance(row, Mapping) else None
            views = _num(_get(row, "views")) if isinstance(row, Mapping) else None
            if (
                isinstance(category, str)
                and CATEGORY_PATTERN.match(category)
                and videos is not None
                and views is not None
                and videos >= 1
                and views >= 0
            ):
                seen[category] = (videos, views)
    # The most watched categories only, so the stored set stays bounded.
    ranked = sorted(seen.items(), key=lambda kv: (-kv[1][0], kv[0]))[:MAX_CATEGORIES]
    old = {c: _clamp(w, low, high) for c, w in current.category_weights.items()}
    total_videos = sum(v for _, (v, _) in ranked)
    new = dict(old)
    moved: list[str] = []
    if total_videos >= MIN_CATEGORY_VIDEOS:
        mean = sum(views for _, (_, views) in ranked) / total_videos
        if mean > 0:
            # Views per video shrunk toward the mean (a category seen once says little), as a
            # ratio to the mean, normalized so the categories seen average 1.
            ratios = {
                c: (views + SMOOTHING_VIDEOS * mean) / (videos + SMOOTHING_VIDEOS) / mean
                for c, (videos, views) in ranked
            }
            norm = sum(ratios.values()) / len(ratios)
            for category, ratio in ratios.items():
                if category not in new and len(new) >= MAX_CATEGORIES:
                    continue  # the stored set stays bounded; dropping one would jump its weight
                before = new.get(category, DEFAULT_WEIGHT)
                after = _moved(before, _clamp(ratio / norm, low, high), step, low, high)
                if abs(after - before) >= 0.005:
                    new[category] = after
                    moved.append(f"{category} {before:.2f}->{after:.2f}")
    if new == dict(current.category_weights):
        return None
    why = ", ".join(moved) if moved else "stored weights brought inside the limits"
    return Change(
        "category_weights",
        dict(current.category_weights),
        dict(sorted(new.items())),
        f"topic-category weights from views per video (smoothed, normalized): {why}",
    )
