"""Model output that fails its checks through the real asset graph: the Gemini writer and
safety classifier (the real google-genai SDK against the local Gemini server, configured as in
production), real PostgreSQL and the offline providers for the rest.

The writer's answers for the day's first topic break the schema every time: each next request
carries the failed check (a different request, paid for once), and after the last version the
topic is rejected with the reasons, the next trend's topic takes its video slot in the same
run, and the content run succeeds with its script written (the stages after it run the same
code whichever topic the script came from, and are tested elsewhere). Every billed answer stays
in the budget ledger.
"""

from __future__ import annotations

from datetime import date

import dagster as dg
import psycopg
import pytest

from fakes import gemini as fake_gemini
from mdame_cli.runs import whole_graph
from mdame_domain.prompt_data import DATA_BEGIN
from mdame_resources.providers.safety import GeminiSafetyClassifier
from mdame_resources.providers.writer import GeminiScriptWriter
from mdame_runtime.partition_keys import partition_key
from tests.providers.gemkit import KEY, assert_balanced

DAY = date(2026, 11, 29)
DIMENSION = "tech"


def _run(pipeline, selection: list[str] | None = None) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        whole_graph(),
        selection=[dg.AssetKey(name) for name in selection] if selection else None,
        partition_key=str(partition_key(DAY, DIMENSION)),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )


def _script_requests(fake: fake_gemini.FakeGemini) -> list[str]:
    """The contents of every script request the writer sent, in order."""
    texts = []
    for request in fake.requests:
        system = str(
            request.body.get("systemInstruction") or request.body.get("system_instruction")
        )
        if "spoken script" in system:
            texts.append(str(request.body["contents"]))
    return texts


def test_answers_failing_their_checks_reject_the_topic_and_the_next_one_is_written(
    pipeline, fresh_db, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.sync()
    with fake_gemini.running() as fake:
        monkeypatch.setenv("MDAME_GEMINI_BASE_URL", fake.base_url)
        pipeline.resources["writer"] = GeminiScriptWriter(api_key=KEY, timeout_s=10)
        pipeline.resources["safety"] = GeminiSafetyClassifier(api_key=KEY, timeout_s=10)
        chosen = _run(pipeline, ["trends", "topics"])
        assert chosen.success, [e.message for e in chosen.all_events if e.is_failure]
        (first,) = pipeline.state.list_work_units("topic", state="approved")

        for _ in range(3):  # the writer's next three answers break the schema
            fake.faults.push("schema")
        result = _run(pipeline, ["scripts"])

        assert result.success, [e.message for e in result.all_events if e.is_failure]
        first = pipeline.state.get_work_unit("topic", first.id)
        assert first.state == "rejected" and first.result["rejected_by"] == "model_output"
        assert first.result["attempts"] == 3 and len(first.result["reasons"]) == 3
        assert "must be a JSON object" in first.result["reasons"][0]
        # Each version of the request is another request, carrying the last failed check.
        sent = _script_requests(fake)
        assert len(sent) == 4  # three versions for the first topic, one for the next
        assert "previous answers were rejected" not in sent[0]
        assert all("previous answers were rejected" in text for text in sent[1:3])
        # The rejections may quote the answer, which was written from feed text: fenced.
        assert all(text.rindex(DATA_BEGIN) < text.index("Answer 1: ") for text in sent[1:3])
        assert "must be a JSON object" in sent[1]
        assert len(set(sent[:3])) == 3

        (script,) = pipeline.state.list_work_units("script")
        assert script.refs["topic_id"] != first.id and script.state == "approved"
        with psycopg.connect(fresh_db.owner, autocommit=True) as owner:
            unusable = owner.execute(
                """SELECT count(DISTINCT request_hash), count(*)
                     FROM mdame.provider_attempts
                    WHERE status = 'failed' AND detail ->> 'failure_class' = 'unusable'"""
            ).fetchone()
            assert unusable == (3, 3)  # billed once each, under three request hashes
            book = assert_balanced(owner)
        billed = sum(r.usage["candidatesTokenCount"] > 0 for r in fake.requests if r.usage)
        assert billed == len([r for r in fake.requests if r.status == 200])
        assert book["held"] == 0 and book["spent"] > 0
