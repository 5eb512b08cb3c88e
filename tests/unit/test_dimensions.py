"""Dimension config fields added for issue 7: required reviews, topic lookback, quota zones."""

from __future__ import annotations

from typing import Any

import pytest

from mdame_domain.dimensions import (
    DimensionConfigError,
    dimension_from_json,
    parse_dimension,
    post_settings,
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


def test_defaults() -> None:
    config = parse_dimension(_data(), "tech.yaml")
    assert config.required_reviews == ("technical",)
    assert config.topic_lookback_days == 14
    assert config.accounts[0].quota_timezone == "America/Los_Angeles"


def test_values_round_trip_through_json() -> None:
    config = parse_dimension(
        _data(
            required_reviews=["technical", "safety", "technical"],
            topic_lookback_days=3,
            accounts=[{"platform": "youtube", "handle": "o", "quota_timezone": "UTC"}],
        ),
        "tech.yaml",
    )
    assert config.required_reviews == ("technical", "safety")
    assert config.topic_lookback_days == 3
    assert config.accounts[0].quota_timezone == "UTC"
    assert dimension_from_json(config.to_json()) == config


def test_a_config_stored_before_the_new_fields_gets_the_defaults() -> None:
    stored = parse_dimension(_data(), "tech.yaml").to_json()
    for name in ("required_reviews", "topic_lookback_days"):
        del stored[name]
    for account in stored["accounts"]:
        del account["quota_timezone"]
    config = dimension_from_json(stored)
    assert config.required_reviews == ("technical",)
    assert config.accounts[0].quota_timezone == "America/Los_Angeles"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"required_reviews": []}, "required_reviews"),
        ({"required_reviews": ["Safety Review"]}, "required_reviews"),
        ({"required_reviews": "technical"}, "required_reviews"),
        ({"topic_lookback_days": -1}, "topic_lookback_days"),
        ({"topic_lookback_days": "14"}, "topic_lookback_days"),
        (
            {"accounts": [{"platform": "youtube", "handle": "@t", "quota_timezone": "Mars/Base"}]},
            "accounts[0].quota_timezone",
        ),
    ],
)
def test_bad_values_name_the_field(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(DimensionConfigError) as err:
        parse_dimension(_data(**extra), "tech.yaml")
    assert err.value.field_name == field


# Issue 9: the youtube block of a dimension file.
def test_youtube_settings_default_and_round_trip() -> None:
    plain = parse_dimension(_data(), "t.yaml")
    assert plain.youtube.privacy_status == "public" and plain.youtube.tags is None
    block = {
        "category_id": 27,
        "privacy_status": "private",
        "notify_subscribers": True,
        "hashtags": ["science"],
        "tags": ["space"],
    }
    config = parse_dimension(_data(youtube=block), "t.yaml")
    assert config.youtube.category_id == "27" and config.youtube.hashtags == ("science",)
    assert dimension_from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"category_id": "99"}, "youtube.category_id"),
        ({"privacy_status": "secret"}, "youtube.privacy_status"),
        ({"notify_subscribers": "yes"}, "youtube.notify_subscribers"),
        ({"hashtags": ["two words"]}, "youtube.hashtags"),
        ({"tags": "space"}, "youtube.tags"),
        ({"colour": "red"}, "youtube.colour"),
        ({"tags": ["space", "bit.ly/deal"]}, "youtube.tags"),
        ({"hashtags": ["@scam"]}, "youtube.hashtags"),
    ],
)
def test_bad_youtube_settings_name_the_field(block: dict[str, Any], field: str) -> None:
    with pytest.raises(DimensionConfigError) as err:
        parse_dimension(_data(youtube=block), "t.yaml")
    assert err.value.field_name == field


def test_tiktok_and_instagram_settings_default_and_round_trip() -> None:
    plain = parse_dimension(_data(), "t.yaml")
    assert plain.tiktok.privacy_level is None and plain.tiktok.hashtags is None
    assert plain.instagram.share_to_feed and post_settings(plain.tiktok) == (
        ("disable_comment", False),
        ("disable_duet", False),
        ("disable_stitch", False),
    )
    config = parse_dimension(
        _data(
            tiktok={"privacy_level": "SELF_ONLY", "disable_duet": True, "hashtags": ["fyp"]},
            instagram={"share_to_feed": False, "hashtags": ["reels"]},
        ),
        "t.yaml",
    )
    assert ("privacy_level", "SELF_ONLY") in post_settings(config.tiktok)
    assert ("disable_duet", True) in post_settings(config.tiktok)
    assert config.tiktok.hashtags == ("fyp",) and config.instagram.hashtags == ("reels",)
    assert post_settings(config.instagram) == (("share_to_feed", False),)
    assert dimension_from_json(config.to_json()) == config
    stored = config.to_json()
    del stored["tiktok"], stored["instagram"]  # stored before the blocks existed
    assert dimension_from_json(stored).tiktok == plain.tiktok


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"tiktok": {"privacy_level": "public"}}, "tiktok.privacy_level"),
        ({"tiktok": {"disable_comment": "yes"}}, "tiktok.disable_comment"),
        ({"tiktok": {"hashtags": ["two words"]}}, "tiktok.hashtags"),
        ({"tiktok": {"hashtags": ["@scam"]}}, "tiktok.hashtags"),
        ({"tiktok": {"duet": False}}, "tiktok.duet"),
        ({"instagram": {"share_to_feed": 1}}, "instagram.share_to_feed"),
        ({"instagram": {"caption": "x"}}, "instagram.caption"),
        ({"instagram": {"hashtags": "reels"}}, "instagram.hashtags"),
    ],
)
def test_bad_platform_settings_name_the_field(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(DimensionConfigError) as err:
        parse_dimension(_data(**extra), "t.yaml")
    assert err.value.field_name == field


# Published as written on every video, so a link or contact there is refused when read.
@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"keywords": ["ai", "deals.example.com"]}, "keywords"),  # the tags without youtube.tags
        ({"call_to_action": "Follow us at @tech60 or call +1 555 013 2999."}, "call_to_action"),
    ],
)
def test_published_settings_with_contact_details_are_refused(
    extra: dict[str, Any], field: str
) -> None:
    with pytest.raises(DimensionConfigError) as err:
        parse_dimension(_data(**extra), "t.yaml")
    assert err.value.field_name == field
    assert "links, handles and contacts are refused" in str(err.value)
    # Keywords that are not the tags are not published as written.
    if field == "keywords":
        parse_dimension(_data(youtube={"tags": ["ai"]}, **extra), "t.yaml")


ACCOUNTS = [
    {"platform": "youtube", "handle": "@tech"},
    {"platform": "tiktok", "handle": "@tech-tt"},
    {"platform": "instagram", "handle": "tech.reels", "daily_posts": 25},
]


def test_each_platform_has_its_daily_posts_and_every_account_publishes_by_default() -> None:
    config = parse_dimension(_data(accounts=ACCOUNTS), "tech.yaml")
    assert [a.daily_posts for a in config.accounts] == [100, 15, 25]
    assert config.publish_to == ("youtube", "tiktok", "instagram")
    assert config.publishing_accounts() == config.accounts
    assert dimension_from_json(config.to_json()) == config


def test_publish_to_leaves_an_accounts_platform_out() -> None:
    config = parse_dimension(_data(accounts=ACCOUNTS, publish_to=["tiktok", "youtube"]), "t.yaml")
    assert [a.platform for a in config.publishing_accounts()] == ["youtube", "tiktok"]
    assert len(config.accounts) == 3  # the Instagram account stays, publishing nothing


@pytest.mark.parametrize(
    ("extra", "field", "reason"),
    [
        ({"publish_to": ["instagram"]}, "publish_to", "instagram has no account"),
        ({"publish_to": ["vimeo"]}, "publish_to", "'vimeo' is not a platform"),
        ({"publish_to": []}, "publish_to", "set active: false"),
        ({"publish_to": "youtube"}, "publish_to", "expected list"),
        (
            {"accounts": [{"platform": "youtube", "handle": "@a"}] * 2},
            "accounts[1].platform",
            "youtube already has an account (accounts[0])",
        ),
        (
            {"accounts": [{"platform": "tiktok", "handle": "@a", "daily_posts": -1}]},
            "accounts[0].daily_posts",
            "non-negative integer",
        ),
        (
            {"accounts": [{"platform": "tiktok", "handle": "@a", "daily_post": 3}]},
            "accounts[0].daily_post",
            "is not an account setting",
        ),
    ],
)
def test_bad_publishing_names_the_field_and_the_fix(
    extra: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(DimensionConfigError) as err:
        parse_dimension(_data(**extra), "tech.yaml")
    assert err.value.field_name == field
    assert reason in str(err.value)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"accounts": [{"platform": "outbox", "handle": "@tech"}]}, "accounts[0].platform"),
        (
            {"accounts": [{"platform": "youtube", "handle": "@tech"}], "publish_to": ["outbox"]},
            "publish_to",
        ),
    ],
)
def test_outbox_is_no_platform_and_the_refusal_names_youtube(
    extra: dict[str, Any], field: str
) -> None:
    """The outbox is the provider that stands in for every platform offline: a file that still
    names it as a platform is refused with the fix, never read as some platform of its own."""
    with pytest.raises(DimensionConfigError) as err:
        parse_dimension(_data(**extra), "tech.yaml")
    assert err.value.field_name == field
    assert "platform: outbox is now platform: youtube" in str(err.value)
    assert "MDAME_PROVIDERS" in str(err.value)


def test_the_sample_niches_publish_to_youtube() -> None:
    from mdame_domain.dimensions import load_registry
    from mdame_pipeline.dimension_registry import DIMENSIONS_DIR

    registry = load_registry(DIMENSIONS_DIR)
    assert registry.errors == () and len(registry.dimensions) >= 3
    for dim in registry.dimensions:
        assert [a.platform for a in dim.accounts] == ["youtube"], dim.slug
