"""The Adaptive Engine's pure rules (slice "adaptive"): bounds and weekly caps always hold."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from mdame_domain.adaptive import (
    HOOK_BOUNDS,
    AdaptiveLimits,
    TunedParams,
    apply_changes,
    hook_limits,
    propose_changes,
    topic_category,
    tuned_params,
)
from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension

TECH = yaml.safe_load((Path(__file__).parents[2] / "dimensions" / "tech.yaml").read_text())
CATEGORIES = ["ai", "chip", "battery", "robot", "phone", "other", "open source"]


def _junk(rng: random.Random) -> Any:
    return rng.choice([None, "x", -1, float("nan"), float("inf"), [], {}, True, 10**9])


def _num(rng: random.Random, low: float, high: float) -> Any:
    return _junk(rng) if rng.random() < 0.05 else rng.uniform(low, high)


def _metrics(rng: random.Random) -> dict[str, Any]:
    """Random, sometimes malformed, Auditor metrics (keys as COMMON.md lists them)."""
    metrics: dict[str, Any] = {
        "videos_published": rng.randint(0, 70),
        "stage_failure_rate": {
            s: _num(rng, 0, 1) for s in ("trends", "topics", "scripts", "renders")
        },
        "halt_rate": _num(rng, 0, 1),
        "hook_scores": {"n": rng.randint(0, 50), "p50": _num(rng, 0, 1), "mean": 0.7},
        "hook_pass_rate": _num(rng, 0, 1),
        "views_trend": _num(rng, -1, 3),
        "trend_volume": {"candidates": _num(rng, 0, 2000), "passed_gate": rng.randint(0, 140)},
        "category_views": {
            c: {"videos": rng.randint(0, 20), "views": _num(rng, 0, 1e6), "likes": 0}
            for c in rng.sample(CATEGORIES, rng.randint(0, len(CATEGORIES)))
        },
    }
    for key in rng.sample(sorted(metrics), rng.randint(0, 2)):  # a key missing or malformed
        if rng.random() < 0.5:
            del metrics[key]
        else:
            metrics[key] = _junk(rng)
    return metrics


def _limits(rng: random.Random) -> AdaptiveLimits:
    lo_h = rng.choice([0.70, 0.72, 0.75])
    lo_v = rng.randint(1, 3)
    lo_g = rng.randint(0, 4)
    return AdaptiveLimits(
        hook_threshold=(lo_h, rng.choice([lo_h, 0.78, 0.80])),
        videos_per_day=(lo_v, rng.randint(lo_v, 10)),
        trend_volume_gate=(lo_g, rng.randint(lo_g, 12)),
        category_weight=(rng.choice([0.5, 0.8, 1.0]), rng.choice([1.0, 1.5, 2.0])),
        step_hook_threshold=rng.choice([0.0, 0.005, 0.01, 0.02]),
        step_videos_per_day=rng.choice([0, 1, 2]),
        step_trend_volume_gate=rng.choice([0, 1, 2]),
        step_category_weight=rng.choice([0.0, 0.05, 0.1, 0.3]),
    )


def _inside(p: TunedParams, limits: AdaptiveLimits) -> None:
    low, high = hook_limits(limits)
    assert HOOK_BOUNDS[0] <= low <= p.hook_threshold <= high <= HOOK_BOUNDS[1]
    assert limits.videos_per_day[0] <= p.videos_per_day <= limits.videos_per_day[1]
    assert limits.trend_volume_gate[0] <= p.trend_volume_gate <= limits.trend_volume_gate[1]
    assert all(
        limits.category_weight[0] <= w <= limits.category_weight[1]
        for w in p.category_weights.values()
    )
    assert isinstance(p.videos_per_day, int) and isinstance(p.trend_volume_gate, int)


def _capped(old: TunedParams, new: TunedParams, limits: AdaptiveLimits) -> None:
    slack = 1e-6
    assert abs(new.hook_threshold - old.hook_threshold) <= limits.step_hook_threshold + slack
    assert abs(new.videos_per_day - old.videos_per_day) <= limits.step_videos_per_day
    assert abs(new.trend_volume_gate - old.trend_volume_gate) <= limits.step_trend_volume_gate
    for c in set(old.category_weights) | set(new.category_weights):
        delta = abs(new.weight(c) - old.weight(c))
        assert delta <= limits.step_category_weight + slack, c


def test_bounds_and_weekly_caps_hold_over_random_metrics_and_many_weeks() -> None:
    """3,000 random (limits, metrics) weeks in 150 chains of 20 consecutive weeks: every set
    stays inside its limits and moves at most one weekly step per parameter per week."""
    rng = random.Random(20261130)
    weeks = 0
    for _ in range(150):
        limits = _limits(rng)
        low, high = hook_limits(limits)
        start = TunedParams(
            rng.uniform(low, high),
            rng.randint(*limits.videos_per_day),
            rng.randint(*limits.trend_volume_gate),
        )
        current = start
        for _ in range(20):
            changes = propose_changes(_metrics(rng), current, limits)
            assert all(c.explanation and c.old != c.new for c in changes)
            assert len({c.name for c in changes}) == len(changes)
            new = tuned_params(0.72, 1, 3, limits, apply_changes(current, changes))
            _inside(new, limits)
            _capped(current, new, limits)
            current, weeks = new, weeks + 1
    assert weeks == 3000


def test_a_value_outside_the_limits_is_brought_inside_and_explained() -> None:
    limits = AdaptiveLimits()
    current = TunedParams(0.65, 7, 30, {"ai": 5.0})
    changes = {c.name: c for c in propose_changes({}, current, limits)}
    assert (
        changes["hook_threshold"].new == 0.70 and "outside" in changes["hook_threshold"].explanation
    )
    assert changes["videos_per_day"].new == 3 and changes["trend_volume_gate"].new == 10
    assert changes["category_weights"].new == {"ai": 2.0}


def test_rules_move_toward_what_the_metrics_suggest() -> None:
    limits = AdaptiveLimits()
    base = TunedParams(0.75, 2, 3)
    strict = {"hook_scores": {"n": 20}, "hook_pass_rate": 0.3}
    (hook,) = [c for c in propose_changes(strict, base, limits) if c.name == "hook_threshold"]
    assert hook.new == pytest.approx(0.74) and "30%" in hook.explanation
    easy = {"hook_scores": {"n": 20, "p50": 0.95}, "hook_pass_rate": 0.97}
    (hook,) = [c for c in propose_changes(easy, base, limits) if c.name == "hook_threshold"]
    assert hook.new == pytest.approx(0.76)
    growing = {"views_trend": 0.4, "stage_failure_rate": {"renders": 0.0}, "halt_rate": 0.0}
    (videos,) = [c for c in propose_changes(growing, base, limits) if c.name == "videos_per_day"]
    assert videos.new == 3
    failing = {"stage_failure_rate": {"trends": 0.5}}
    names = {c.name: c.new for c in propose_changes(failing, base, limits)}
    assert names == {"videos_per_day": 1, "trend_volume_gate": 2}
    views = {
        "category_views": {
            "ai": {"videos": 10, "views": 50_000},
            "chip": {"videos": 10, "views": 5_000},
        }
    }
    (weights,) = propose_changes(views, base, limits)
    assert weights.new["ai"] == pytest.approx(1.1) and weights.new["chip"] == pytest.approx(0.9)
    assert propose_changes({}, base, limits) == []  # no signal: no change
    assert propose_changes(strict, base, AdaptiveLimits(enabled=False)) == []


def test_tuned_params_fall_back_to_the_yaml_and_clamp_to_its_limits() -> None:
    limits = AdaptiveLimits(videos_per_day=(1, 2))
    assert tuned_params(0.72, 1, 3, limits, None) == TunedParams(0.72, 1, 3, {}, 0)
    stored = {"hook_threshold": 0.9, "videos_per_day": 5, "category_weights": {"ai": 9}}
    got = tuned_params(0.72, 1, 3, limits, stored, version=4)
    assert (got.hook_threshold, got.videos_per_day, got.trend_volume_gate) == (0.80, 2, 3)
    assert got.weight("ai") == 2.0 and got.weight("unknown") == 1.0 and got.version == 4
    ignored = tuned_params(0.72, 1, 3, limits, {"videos_per_day": "many"})
    assert ignored.videos_per_day == 1


def test_topic_category_is_the_auditors_category() -> None:
    assert topic_category(["Open Source", "ai"]) == "open source"
    assert topic_category([]) == "other"
    # A name the parameter sets cannot store is never learned, so it keeps weight 1.
    odd = {
        "C++": {"videos": 9, "views": 10**6},
        "ai": {"videos": 4, "views": 4000},
        "chip": {"videos": 4, "views": 40},
    }
    (change,) = propose_changes({"category_views": odd}, TunedParams(0.72, 1, 3), AdaptiveLimits())
    assert set(change.new) == {"ai", "chip"}


def test_the_yaml_block_parses_with_defaults_and_round_trips() -> None:
    config = parse_dimension(TECH, "tech.yaml")
    assert config.trend_volume_gate == 3 and config.adaptive == AdaptiveLimits()
    custom = {
        **TECH,
        "trend_volume_gate": 4,
        "adaptive": {
            "videos_per_day": {"min": 1, "max": 2},
            "hook_threshold": {"min": 0.72, "max": 0.78},
            "weekly_step": {"hook_threshold": 0.02},
        },
    }
    config = parse_dimension(custom, "tech.yaml")
    assert config.adaptive.videos_per_day == (1, 2) and config.adaptive.step_hook_threshold == 0.02
    assert dimension_from_json(config.to_json()) == config
    assert config.tuned(None).trend_volume_gate == 4


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"adaptive": {"hook_threshold": {"min": 0.6, "max": 0.8}}}, "adaptive.hook_threshold"),
        ({"adaptive": {"videos_per_day": {"min": 2, "max": 3}}}, "adaptive.videos_per_day"),
        ({"adaptive": {"videos_per_day": {"min": 1.5, "max": 3}}}, "adaptive.videos_per_day"),
        ({"adaptive": {"category_weight": {"min": 1.2, "max": 2}}}, "adaptive.category_weight"),
        (
            {"adaptive": {"weekly_step": {"videos_per_day": 9}}},
            "adaptive.weekly_step.videos_per_day",
        ),
        ({"adaptive": {"weekly_step": {"speed": 1}}}, "adaptive.weekly_step"),
        ({"adaptive": {"tempo": 1}}, "adaptive"),
        ({"adaptive": {"enabled": "yes"}}, "adaptive.enabled"),
        ({"adaptive": []}, "adaptive"),
        ({"trend_volume_gate": 99}, "trend_volume_gate"),
        (
            {"trend_volume_gate": 20, "adaptive": {"trend_volume_gate": {"min": 1, "max": 10}}},
            "adaptive.trend_volume_gate",
        ),
    ],
)
def test_bad_adaptive_yaml_names_the_field(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(DimensionConfigError) as info:
        parse_dimension({**TECH, **patch}, "tech.yaml")
    assert info.value.field_name == field
