"""Plain functions of the Gemini slice: the dimension's budget, model and price fields, cost
arithmetic, Retry-After, audio mime types and model-output checks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension
from mdame_domain.model_output import (
    InvalidModelOutput,
    check_script_length,
    critic_verdicts,
    hook_text,
    rubric_score,
    script_draft,
    target_words,
)
from mdame_domain.paid_calls import (
    ModelPrice,
    UnknownPrice,
    audio_mime,
    cost_micros,
    parse_retry_after,
    price_for,
)


def _data(**extra: Any) -> dict[str, Any]:
    return {
        "slug": "tech",
        "title": "Tech",
        "visual_style": "neon",
        "palette": ["#000000", "#ffffff"],
        "feeds": ["feeds/tech.xml"],
        "accounts": [{"platform": "youtube", "handle": "@tech"}],
        **extra,
    }


def test_gemini_fields_default_parse_and_round_trip() -> None:
    config = parse_dimension(
        _data(
            daily_budget_usd=0.25,
            gemini_prices={"gemini-3.8-flash": {"input_usd": 1.5, "output_usd": 7.5}},
            tone="dry",
            call_to_action="Follow for more.",
            target_seconds=50,
        ),
        "tech.yaml",
    )
    assert config.daily_budget_micros == 250_000
    assert config.gemini_prices == (("gemini-3.8-flash", 1_500_000, 7_500_000),)
    assert dimension_from_json(config.to_json()) == config
    assert parse_dimension(_data(), "t.yaml").daily_budget_micros == 1_000_000


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("daily_budget_usd", -1),
        ("daily_budget_usd", "1"),
        ("daily_budget_usd", True),
        ("gemini_text_model", "Gemini 3!"),
        ("gemini_prices", {"gemini-3.8-flash": {"input_usd": 1}}),
        ("gemini_prices", {"gemini-3.8-flash": {"input_usd": -1, "output_usd": 1}}),
        ("target_seconds", 120),
        ("tone", " "),
    ],
)
def test_bad_gemini_fields_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(DimensionConfigError, match=field):
        parse_dimension(_data(**{field: value}), "tech.yaml")


def test_cost_is_exact_integer_micros_with_thinking_at_the_output_rate() -> None:
    price = ModelPrice(750_000, 3_750_000)
    assert cost_micros(price, 1_000_000, 0, 0) == 750_000
    assert cost_micros(price, 0, 100, 100) == cost_micros(price, 0, 200, 0) == 750
    assert cost_micros(price, 1, 0, 0) == 1  # rounded up, never down to free
    overrides = {"my-model": price}
    assert price_for("my-model", overrides) is price
    with pytest.raises(UnknownPrice, match="gemini_prices"):
        price_for("unknown-model")


def test_retry_after() -> None:
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Mon, 30 Nov 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("99999") == 120.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None


def test_audio_mime_types() -> None:
    assert audio_mime("audio/L16;codec=pcm;rate=24000") == ("pcm", 24000)
    assert audio_mime("audio/wav") == ("wav", None)
    with pytest.raises(ValueError, match="unsupported"):
        audio_mime("audio/mpeg")


def test_model_output_checks_refuse_bad_answers() -> None:
    with pytest.raises(InvalidModelOutput, match="body"):
        script_draft({"call_to_action": "Follow.", "language": "en"}, "en")
    with pytest.raises(InvalidModelOutput, match="object"):
        script_draft(["not", "an", "object"], "en")
    with pytest.raises(InvalidModelOutput, match="80-150"):
        check_script_length("word " * 200, 112)
    with pytest.raises(InvalidModelOutput, match="target"):
        check_script_length("word " * 82, 140)
    with pytest.raises(InvalidModelOutput, match="hook has"):
        hook_text({"hook": "Too short"})
    hooks = ["a b c d e", "f g h i j", "k l m n o"]
    good = {
        "scores": [
            {"hook_index": i, "curiosity_gap": 1, "specificity": 1, "honesty": 1, "reason": "ok"}
            for i in range(3)
        ]
    }
    assert [v.score for v in critic_verdicts(good, hooks)] == [1.0, 1.0, 1.0]
    twice = {"scores": [good["scores"][0]] * 3}
    with pytest.raises(InvalidModelOutput, match="twice"):
        critic_verdicts(twice, hooks)
    out_of_range = {"scores": [{**good["scores"][0], "honesty": 1.5}, *good["scores"][1:]]}
    with pytest.raises(InvalidModelOutput, match="honesty"):
        critic_verdicts(out_of_range, hooks)
    assert rubric_score(1.0, 1.0, 0.4) == 0.0  # a broken promise scores nothing
    assert target_words(45) == 112 and target_words(10) == 80
