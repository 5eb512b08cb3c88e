"""The topics and scripts assets with the Gemini safety classifier and writer, configured as in
production (the key through dg.EnvVar, the endpoint through MDAME_GEMINI_BASE_URL), against the
local Gemini server: scripts are written and paid for once, the cap stops paid work with a
clear event and nothing half-written, and the API key appears nowhere: not in logs, events,
attempts, any table, run metadata or exception text."""

from __future__ import annotations

import uuid
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest

from mdame_assets.defs.scripts.assets import scripts
from mdame_assets.defs.topics.assets import topics
from mdame_assets.defs.trends.assets import trends
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.safety import GeminiSafetyClassifier
from mdame_resources.providers.selection import offline_providers
from mdame_resources.providers.writer import GeminiScriptWriter
from mdame_resources.state import StateStoreResource, close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key
from tests.adminkit import as_admin
from tests.providers.gemkit import DIMENSION, assert_balanced

DAY = date(2026, 11, 29)


def _resources(app_url: str) -> dict[str, Any]:
    key = dg.EnvVar("GEMINI_API_KEY")
    return {
        "state": StateStoreResource(database_url=app_url),
        "media": MediaStoreResource(),
        **offline_providers(),
        "safety": GeminiSafetyClassifier(api_key=key, timeout_s=5),
        "writer": GeminiScriptWriter(api_key=key, timeout_s=5),
    }


def _run(instance, app_url: str, day: date) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [trends, topics, scripts],
        partition_key=str(partition_key(day, DIMENSION)),
        instance=instance,
        resources=_resources(app_url),
        raise_on_error=False,
    )


def _everything_in(owner: psycopg.Connection) -> str:
    tables = [
        row[0]
        for row in owner.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'mdame'"
        ).fetchall()
    ]
    texts = [
        str(
            owner.execute(
                f"SELECT coalesce(string_agg(t::text, ' '), '') FROM mdame.{t} t"
            ).fetchone()[0]
        )
        for t in tables
    ]
    return "\n".join(texts)


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    [materialization] = [
        e.event_specific_data.materialization
        for e in result.all_events
        if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key == dg.AssetKey("scripts")
    ]
    return {k: v.value for k, v in materialization.metadata.items()}


@pytest.fixture
def rig(fresh_db, fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    marker = f"gemini-key-marker-{uuid.uuid4().hex}"
    monkeypatch.setenv("MDAME_HOME", str(tmp_path))
    monkeypatch.setenv("GEMINI_API_KEY", marker)
    monkeypatch.setenv("MDAME_GEMINI_BASE_URL", fake.base_url)
    state = StateStore(fresh_db.app, env="dev")
    sync_registry(as_admin(state), DIMENSIONS_DIR)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(DIMENSION_PARTITION, [DIMENSION])
        yield marker, state, instance, fresh_db
    close_clients()
    state.close()


def test_scripts_are_written_by_gemini_once_and_the_key_leaks_nowhere(
    rig, fake, owner, capfd, caplog
):
    marker, state, instance, db = rig
    first = _run(instance, db.app, DAY)
    assert first.success, [e.message for e in first.all_events if e.is_failure]
    [script] = state.list_work_units("script")
    assert script.payload["provider"] == "GeminiScriptWriter"
    assert script.payload["spend_micros"] > 0
    meta = _metadata(first)
    assert meta["spend_micros"] == script.payload["spend_micros"]
    paid = fake.request_count
    assert paid >= 1 + 5 + 1  # topic safety, script + 3 hooks + critic, script safety
    again = _run(instance, db.app, DAY)  # a re-run: no duplicate, nothing paid twice
    assert again.success
    assert len(state.list_work_units("script")) == 1 and fake.request_count == paid
    assert_balanced(owner)

    # A failing run, for exception text: every call of the next day answers 500.
    for _ in range(50):
        fake.faults.push("500")
    failed = _run(instance, db.app, date(2026, 11, 30))
    assert not failed.success
    errors = [str(e.event_specific_data) for e in failed.all_events if e.is_failure]
    assert any("HTTP 500" in text for text in errors)

    logs = []
    for result in (first, again, failed):
        logs += [str(r) for r in instance.all_logs(result.run_id)]
    captured = capfd.readouterr()
    haystacks = {
        "database (every table: events, provider_attempts, ledgers, units)": _everything_in(owner),
        "dagster event log and run metadata": "\n".join(logs),
        "exception text": "\n".join(errors),
        "stdout/stderr": captured.out + captured.err,
        "log records": caplog.text,
    }
    for where, text in haystacks.items():
        assert text and marker not in text, where


def test_the_cap_stops_the_scripts_with_an_event_and_nothing_half_written(rig, fake, owner):
    marker, state, instance, db = rig
    # Enough for the topic's safety check, not for the writer's first call.
    owner.execute(
        "UPDATE mdame.dimensions SET config = jsonb_set(config, '{daily_budget_micros}', '2000')"
        " WHERE slug = %s",
        [DIMENSION],
    )
    result = _run(instance, db.app, DAY)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    meta = _metadata(result)
    assert "daily budget of dimension 'tech' is exhausted" in meta["budget_exhausted"]
    assert state.list_work_units("script") == []
    [topic] = [t for t in state.list_work_units("topic") if t.state == "approved"]
    assert topic.result.get("rejected_by") is None  # still approved: nothing half-written
    events = owner.execute(
        "SELECT detail FROM mdame.events WHERE event = 'budget_exhausted'"
    ).fetchall()
    assert len(events) == 1
    assert_balanced(owner)


def test_a_hook_rejected_topic_keeps_the_critics_reasons_and_its_spend(rig, fake, owner):
    marker, state, instance, db = rig
    fake.set_score(0.3)  # the critic scores every hook below the threshold
    result = _run(instance, db.app, DAY)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    assert _metadata(result)["outcomes"] == ["hook_rejected"]
    assert state.list_work_units("script") == []
    [topic] = [t for t in state.list_work_units("topic") if t.state == "rejected"]
    assert topic.result["rejected_by"] == "hook" and topic.result["attempts"] == 3
    assert len(topic.result["reasons"]) == 3 and topic.result["spend_micros"] > 0
    assert_balanced(owner)


# The model's answers carry a link, a short link, an e-mail address, a phone number and
# handles in the title (hook), the body and the call to action.
HOSTILE_HOOK = "Why could this open battery double the life of your phone, asks @cellscam?"
HOSTILE_BODY = (
    "Researchers released an open source sodium battery design that kept most of its capacity. "
    "Read the full report at https://deals.example/battery?ref=feed before it disappears. "
    "The cells lasted through two thousand charge cycles in a careful lab test. "
    "For free samples, email sales@cells.example or call +1 555 013 2999 today. "
    "Engineers say the design uses cheap and common materials found almost everywhere. "
    "The chemistry could reach phones and laptops within the next few years, experts said. "
    "Independent labs still need to repeat the results before anyone can be sure of them. "
    "Makers of phones are watching the test results very closely this year. "
    "Grab a discount at bit.ly/cheapcells before the offer ends."
)
HOSTILE_CTA = "Follow us on @tech60 for more battery stories like this one."


def _published_fields(script: dict[str, Any]) -> list[str]:
    return [
        script["hook"],
        script["text"],
        script["call_to_action"],
        *script["body_sentences"],
        *(hook for hook, _score in script["hook_candidates"]),
    ]


def test_links_handles_and_contacts_from_the_model_are_never_recorded(rig, fake, owner):
    marker, state, instance, db = rig
    fake.set_field("hook", HOSTILE_HOOK)
    fake.set_field("body", HOSTILE_BODY)
    fake.set_field("call_to_action", HOSTILE_CTA)
    result = _run(instance, db.app, DAY)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    [unit] = state.list_work_units("script")
    assert unit.state == "approved"
    script = unit.payload["script"]
    recorded = "\n".join(_published_fields(script))
    for detail in ("http", "deals.example", "bit.ly", "@", "cells.example", "555", "013 2999"):
        assert detail not in recorded, detail
    assert "sodium battery design" in script["text"]  # the story itself stays
    assert script["hook"] == "Why could this open battery double the life of your phone, asks?"
    assert script["call_to_action"] == "Follow us for more battery stories like this one."
    assert script["word_count"] == len(script["text"].split())
    # The removal is in the script's safety audit, by kind, without the links themselves.
    [(verdict, reasons)] = owner.execute(
        "SELECT verdict, reasons FROM mdame.safety_audit_logs WHERE subject_kind = 'script'"
    ).fetchall()
    assert verdict == "allow"
    assert "removed 1 handle from the hook" in reasons
    [whole] = [r for r in reasons if r.endswith("from the script text")]
    assert all(kind in whole for kind in ("2 handle", "url", "email", "phone", "domain"))
    assert "deals.example" not in str(reasons)
    assert_balanced(owner)


def test_a_title_that_is_mostly_a_link_refuses_the_script_without_a_classifier_call(
    rig, fake, owner
):
    marker, state, instance, db = rig
    fake.set_field("hook", "Win now at bit.ly/free-phone-today with @freephones")
    result = _run(instance, db.app, DAY)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    [unit] = state.list_work_units("script")
    assert unit.state == "rejected"
    assert "bit.ly" not in unit.payload["script"]["hook"]
    [(verdict, rule, reasons)] = owner.execute(
        "SELECT verdict, rule, reasons FROM mdame.safety_audit_logs WHERE subject_kind = 'script'"
    ).fetchall()
    assert (verdict, rule) == ("block", "contact_details")
    assert any("hook" in reason and "contact details" in reason for reason in reasons)
    # The topic's safety check is the only classifier call: the refused script paid for none.
    classifier_calls = [r for r in fake.requests if "allowed" in str(r.body)]
    assert len(classifier_calls) == 1
    assert_balanced(owner)
