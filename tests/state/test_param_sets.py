"""Versioned parameter sets (0017, slice "adaptive"): apply (under the dimension's lock, within
the limits it was registered with), one change a week, rollback, the CLI, and what the pipeline
reads after a rollback."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from test_fencing import hold

from mdame_cli.main import main as mdame
from mdame_core.state import InvalidInput, NotFound, StateConflict, StateStore
from mdame_domain.dimensions import parse_dimension
from mdame_pipeline.adaptive import run_engine
from mdame_runtime.partition_keys import PartitionRef
from mdame_runtime.step import _dimension
from tests.adminkit import as_admin

WEEK, NEXT = date(2026, 11, 23), date(2026, 11, 30)  # Mondays
TECH = yaml.safe_load((Path(__file__).parents[2] / "dimensions" / "tech.yaml").read_text())
CONFIG = parse_dimension(TECH, "tech.yaml")


def _register(state: StateStore, adaptive: dict[str, Any] | None = None) -> None:
    """tech as the registry sync writes it, with its YAML's `adaptive:` block (or `adaptive`)."""
    yaml_doc = TECH if adaptive is None else {**TECH, "adaptive": adaptive}
    as_admin(state).upsert_dimension("tech", "Tech", parse_dimension(yaml_doc, "t.yaml").to_json())


@pytest.fixture
def tech(state: StateStore) -> StateStore:
    """The Adaptive Engine's view: tech registered, its pipeline lock held."""
    _register(state)
    return hold(state, "tech")


def _apply(state: StateStore, params: dict[str, Any], week: date = WEEK, **kw: Any):
    return state.apply_param_set(
        "tech",
        week,
        kw.pop("effective", week + timedelta(days=7)),
        params,
        [],
        kw.pop("why", "because"),
    )


def _rows(owner: psycopg.Connection) -> list[tuple[Any, ...]]:
    return owner.execute(
        "SELECT version, params, rolled_back_at IS NOT NULL FROM mdame.param_sets ORDER BY id"
    ).fetchall()


def test_apply_is_versioned_idempotent_and_one_change_a_week(tech: StateStore, owner) -> None:
    assert _apply(tech, {"hook_threshold": 0.73}) == (1, True)
    assert _apply(tech, {"hook_threshold": 0.73}) == (1, False)  # the same proposal again
    with pytest.raises(StateConflict, match="already has a parameter change for the week"):
        _apply(tech, {"hook_threshold": 0.72})
    assert _apply(tech, {"hook_threshold": 0.74, "videos_per_day": 2}, NEXT) == (2, True)
    current = tech.current_param_set("tech")
    assert current is not None and (current.version, current.parent_version) == (2, 1)
    assert [s.version for s in tech.param_sets("tech")] == [1, 2]
    assert tech.current_param_set("tech", day=NEXT) is not None
    assert tech.current_param_set("tech", day=NEXT).version == 1  # read from the day after


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"hook_threshold": 0.69}, "outside its limits"),
        ({"hook_threshold": 0.85}, "outside its limits"),
        ({"hook_threshold": "high"}, "must be a number"),
        ({"videos_per_day": 4}, "outside its limits"),
        ({"videos_per_day": 1.5}, "whole number"),
        ({"trend_volume_gate": -1}, "outside its limits"),
        ({"category_weights": {"ai": 3}}, "outside its limits"),
        ({"category_weights": {"AI!": 1}}, "not a category name"),
        ({"category_weights": [1]}, "must be an object"),
        ({"tempo": 1}, "not a tunable parameter"),
        ({}, "at least one parameter"),
    ],
)
def test_bad_params_are_refused_and_nothing_is_lost(
    tech: StateStore, owner, params: dict[str, Any], message: str
) -> None:
    _apply(tech, {"hook_threshold": 0.72}, date(2026, 11, 16))
    before = _rows(owner)
    with pytest.raises(InvalidInput, match=message):
        _apply(tech, params)
    assert _rows(owner) == before


def test_bad_limits_steps_and_dates_are_refused(tech: StateStore, owner) -> None:
    _apply(tech, {"hook_threshold": 0.72, "category_weights": {"ai": 1.0}}, date(2026, 11, 16))
    before = _rows(owner)
    cases = [
        ({"hook_threshold": 0.75}, {}, "more than the weekly step"),
        ({"category_weights": {"ai": 1.5}}, {}, "more than the weekly step"),
        ({"hook_threshold": 0.72}, {"effective": WEEK}, "must be after week_start"),
        ({"hook_threshold": 0.72}, {"why": ""}, "explanation"),
    ]
    for params, kw, message in cases:
        with pytest.raises(InvalidInput, match=message):
            _apply(tech, params, **kw)
    with pytest.raises(NotFound, match="unknown dimension"):
        tech.apply_param_set("nope", WEEK, NEXT, {"hook_threshold": 0.72}, [], "x")
    assert _rows(owner) == before


def test_the_limits_are_the_registered_ones_not_the_callers(tech: StateStore, owner) -> None:
    """The YAML's `adaptive:` block as last synced bounds every set (and is stored with it);
    a caller has no say in them."""
    _register(
        tech, {"hook_threshold": {"min": 0.70, "max": 0.725}, "weekly_step": {"videos_per_day": 2}}
    )
    with pytest.raises(InvalidInput, match=r"outside its limits \[0.7, 0.725\]"):
        _apply(tech, {"hook_threshold": 0.73})
    assert _apply(tech, {"hook_threshold": 0.725, "videos_per_day": 3}) == (1, True)
    [stored] = tech.param_sets("tech")
    assert stored.limits["hook_threshold"] == {"min": 0.7, "max": 0.725}
    assert stored.limits["weekly_step"]["videos_per_day"] == 2
    # A registration from before the block existed, and a YAML that turns the engine off.
    as_admin(tech).upsert_dimension("tech", "Tech", {"daily_budget_micros": 1_000})
    with pytest.raises(NotFound, match="no registered adaptive limits"):
        _apply(tech, {"hook_threshold": 0.72}, NEXT)
    _register(tech, {"enabled": False})
    with pytest.raises(StateConflict, match="disables the Adaptive Engine"):
        _apply(tech, {"hook_threshold": 0.72}, NEXT)
    assert len(_rows(owner)) == 1


def test_rollback_restores_the_previous_set_then_the_yaml(tech: StateStore, owner) -> None:
    with pytest.raises(NotFound, match="no parameter set to roll back"):
        as_admin(tech).rollback_param_set("tech", "test")
    _apply(tech, {"videos_per_day": 2}, date(2026, 11, 16))
    _apply(tech, {"videos_per_day": 3}, WEEK)
    assert as_admin(tech).rollback_param_set("tech", "too many") == (2, 1)
    assert as_admin(tech).rollback_param_set("tech", "still too many") == (1, 0)
    with pytest.raises(NotFound, match="no parameter set to roll back"):
        as_admin(tech).rollback_param_set("tech", "again")
    assert [r[2] for r in _rows(owner)] == [True, True]  # kept, marked
    # A re-run of a rolled-back week's proposal does not bring it back.
    assert _apply(tech, {"videos_per_day": 3}, WEEK) == (2, False)
    assert tech.current_param_set("tech") is None


def test_cli_rollback_and_the_pipeline_reads_the_restored_values(
    tech: StateStore, fresh_db, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("ENV", "dev")
    monkeypatch.setenv("MDAME_DATABASE_URL", fresh_db.owner)
    monkeypatch.setenv("MDAME_APP_DATABASE_URL", fresh_db.app)
    day = date(2026, 12, 1)
    _apply(tech, {"hook_threshold": 0.73, "videos_per_day": 2}, date(2026, 11, 16))
    _apply(tech, {"hook_threshold": 0.74, "videos_per_day": 3}, WEEK)
    _, _, params = _dimension(tech, PartitionRef(day, "tech"))
    assert (params.version, params.hook_threshold, params.videos_per_day) == (2, 0.74, 3)

    assert mdame(["params", "show", "tech"]) == 0
    shown = capsys.readouterr().out
    assert "current parameter set version 2" in shown and "v1 (from v0)" in shown
    assert mdame(["params", "rollback", "tech"]) == 0
    assert "rolled back version 2; current is version 1" in capsys.readouterr().out
    _, _, params = _dimension(tech, PartitionRef(day, "tech"))
    assert (params.version, params.hook_threshold, params.videos_per_day) == (1, 0.73, 2)

    assert mdame(["params", "rollback", "tech"]) == 0
    _, _, params = _dimension(tech, PartitionRef(day, "tech"))
    assert (params.version, params.hook_threshold, params.videos_per_day) == (0, 0.72, 1)
    capsys.readouterr()
    assert mdame(["params", "rollback", "tech"]) == 3
    assert "no parameter set to roll back" in capsys.readouterr().err
    assert mdame(["params", "rollback", "nope"]) == 2
    assert "unknown dimension 'nope'" in capsys.readouterr().err


def test_the_engine_writes_an_explained_bounded_set_once_a_week(tech: StateStore) -> None:
    metrics = {
        "hook_scores": {"n": 12, "p50": 0.7},
        "hook_pass_rate": 0.25,
        "views_trend": 0.3,
        "stage_failure_rate": {"trends": 0.0},
        "halt_rate": 0.0,
        "trend_volume": {"candidates": 210, "passed_gate": 100},
        "category_views": {"ai": {"videos": 5, "views": 9000}, "chip": {"videos": 5, "views": 100}},
    }
    first = run_engine(tech, CONFIG, WEEK, metrics, today=date(2026, 11, 29))
    assert first.created and first.version == 1 and first.effective_from == NEXT
    assert {c.name for c in first.changes} == {
        "hook_threshold",
        "videos_per_day",
        "trend_volume_gate",
        "category_weights",
    }
    assert "hook threshold 0.720 -> 0.710" in first.markdown
    assert "mdame params rollback tech" in first.markdown
    again = run_engine(tech, CONFIG, WEEK, {}, today=date(2026, 11, 29))  # a re-run
    assert (again.version, again.created, again.changes) == (1, False, first.changes)
    stored = tech.current_param_set("tech")
    assert stored is not None and stored.params["videos_per_day"] == 2
    assert stored.explanation == first.markdown
    quiet = run_engine(tech, CONFIG, NEXT, {}, today=date(2026, 12, 6))
    assert quiet.changes == () and quiet.version == 1 and not quiet.created


def test_the_asset_reads_the_report_writes_a_set_and_explains_it_everywhere(
    state: StateStore, fresh_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weekly asset, materialized by Dagster, on a report seeded through store_report."""
    import dagster as dg

    from mdame_assets.defs.adaptive.assets import adaptive_engine
    from mdame_pipeline.locks import held_lock
    from mdame_resources.notify import OutboxNotifier, read_outbox
    from mdame_resources.state import StateStoreResource

    monkeypatch.setenv("ENV", "dev")
    _register(state)
    tech = state
    metrics = {"hook_scores": {"n": 9}, "hook_pass_rate": 0.2, "views_trend": -0.5}
    with held_lock(state, "tech", "auditor") as auditor:  # released: the asset takes it
        auditor.store_report("tech", WEEK, metrics, "# Week report", [])
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dimension", ["tech"])
    resources = {
        "state": StateStoreResource(database_url=fresh_db.app),
        "notifier": OutboxNotifier(root=str(tmp_path)),
    }
    key = dg.MultiPartitionKey({"week": WEEK.isoformat(), "dimension": "tech"})
    for _ in range(2):  # a re-run changes nothing more and sends nothing more
        result = dg.materialize(
            [adaptive_engine], partition_key=key, resources=resources, instance=instance
        )
        assert result.success
    (materialization,) = result.asset_materializations_for_node("adaptive_engine")
    explanation = materialization.metadata["explanation"].value
    assert "hook threshold 0.720 -> 0.710" in str(explanation)
    assert "videos per day" not in str(explanation)  # 1 is already the lowest
    report = tech.get_report("tech", WEEK)
    assert report is not None and report.markdown.count("### Adaptive Engine: tech") == 1
    assert report.markdown.startswith("# Week report") and report.metrics == metrics
    sent = read_outbox(tmp_path, "tech")
    assert len(sent) == 1 and "hook threshold 0.720 -> 0.710" in sent[0]["text"]
    current = tech.current_param_set("tech")
    assert current is not None and current.version == 1
    assert current.effective_from == max(NEXT, tech.db_now().date() + timedelta(days=1))
