"""Secrets and endpoints reach resources through dg.EnvVar: the definitions hold the variable's
name, the run reads its value; and a partition is read by dimension name from the context."""

from datetime import date

import dagster as dg
import pytest

from mdame_assets.partitions import content_partitions
from mdame_assets.resources import shared_resources
from mdame_resources.providers.selection import offline_providers, production_providers
from mdame_resources.state import StateStoreResource, close_clients
from mdame_runtime.partition_keys import PartitionRef, partition_key


@dg.asset
def recorded_env(state: StateStoreResource) -> str:
    return state.get_client().environment()


def test_the_state_store_url_is_an_env_var_read_by_the_run(fresh_db, monkeypatch):
    monkeypatch.setenv("MDAME_APP_DATABASE_URL", fresh_db.app)
    resources = shared_resources()
    field = resources["state"].__dict__.get("database_url")
    # What the definitions (and the UI) hold is the variable, not the URL with its password.
    assert isinstance(field, dg.EnvVar) and field.env_var_name == "MDAME_APP_DATABASE_URL"

    with dg.instance_for_test() as instance:  # see test_run_sensors.live_instance
        result = dg.materialize(
            [recorded_env], resources={"state": resources["state"]}, instance=instance
        )
    close_clients()
    assert result.output_for_node("recorded_env") == "dev"

    # The same definitions, the variable now naming a database that does not exist: the run
    # reads the variable when it starts, so this run fails to connect.
    monkeypatch.setenv("MDAME_APP_DATABASE_URL", fresh_db.app.rsplit("/", 1)[0] + "/no_such_db")
    with dg.instance_for_test() as instance:
        broken = dg.materialize(
            [recorded_env],
            resources={"state": resources["state"]},
            raise_on_error=False,
            instance=instance,
        )
    close_clients()
    assert not broken.success


def test_production_secrets_are_env_vars():
    providers = production_providers()
    for name, field in (
        ("safety", "api_key"),
        ("writer", "api_key"),
        ("voice", "gemini_api_key"),
        ("youtube_publisher", "client_secrets_file"),
        ("notifier", "bot_token"),  # issue 12, alerts
    ):
        value = providers[name].__dict__.get(field)
        assert isinstance(value, dg.EnvVar), (name, field, type(value))
    # TikTok's app key and secret are read from the environment only when a TikTok account is
    # opened: the definitions hold neither, and a deployment without TikTok needs neither.
    tiktok = providers["tiktok_publisher"]
    assert (tiktok.client_key, tiktok.client_secret) == ("", "")


@dg.asset(partitions_def=content_partitions)
def seen_partition(context: dg.AssetExecutionContext) -> str:
    return PartitionRef.of(context).key


def test_partition_ref_reads_the_context_by_dimension_name():
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("dimension", ["tech"])
        key = partition_key(date(2026, 11, 29), "tech")
        result = dg.materialize([seen_partition], partition_key=str(key), instance=instance)
    assert result.output_for_node("seen_partition") == "2026-11-29|tech"
    with pytest.raises(ValueError, match="not YYYY-MM-DD"):
        PartitionRef.parse("tech")


def test_the_provider_set_is_chosen_by_mdame_providers(monkeypatch):
    from mdame_core.settings import SettingsError
    from mdame_resources.providers.publisher import YouTubePublisher
    from mdame_resources.providers.selection import providers_for_environment
    from mdame_resources.providers.visuals import ProceduralVisuals
    from mdame_resources.providers.writer import GeminiScriptWriter, LocalScriptWriter

    monkeypatch.delenv("MDAME_PROVIDERS", raising=False)
    assert isinstance(providers_for_environment()["writer"], LocalScriptWriter)  # dev default

    monkeypatch.setenv("MDAME_PROVIDERS", "fakes")
    fakes = providers_for_environment()
    assert isinstance(fakes["writer"], GeminiScriptWriter)  # the production code path
    assert isinstance(fakes["visuals"], ProceduralVisuals)  # ... without a GPU
    assert isinstance(fakes["youtube_publisher"], YouTubePublisher)  # to the local fake channel

    monkeypatch.setenv("ENV", "prod")
    monkeypatch.delenv("MDAME_PROVIDERS")
    assert isinstance(
        providers_for_environment()["youtube_publisher"], YouTubePublisher
    )  # prod default
    monkeypatch.setenv("MDAME_PROVIDERS", "fakes")
    visuals = providers_for_environment()["visuals"]
    refusal = pytest.raises(dg.DagsterResourceFunctionError)
    with dg.instance_for_test() as instance, refusal as refused:
        dg.materialize([recorded_env], resources={"state": visuals}, instance=instance)
    assert "ProceduralVisuals is an offline provider and ENV=prod refuses it" in str(
        refused.value.__cause__
    )

    monkeypatch.setenv("MDAME_PROVIDERS", "mocks")
    with pytest.raises(
        SettingsError,
        match="MDAME_PROVIDERS='mocks' is not allowed: it takes one of offline, fakes, production",
    ):
        providers_for_environment()


def test_every_publishers_upload_grace_is_the_one_setting(monkeypatch):
    """How long a killed holder's upload may still be in flight is MDAME_UPLOAD_GRACE_S for the
    outbox as for the platforms (a crash test shortens it), 120 s unless set."""
    publishers = ("youtube_publisher", "tiktok_publisher", "instagram_publisher")
    monkeypatch.delenv("MDAME_UPLOAD_GRACE_S", raising=False)
    for providers in (offline_providers(), production_providers()):
        assert [providers[key].upload_grace_s for key in publishers] == [120, 120, 120]

    monkeypatch.setenv("MDAME_UPLOAD_GRACE_S", "3")
    for providers in (offline_providers(), production_providers()):
        assert [providers[key].upload_grace_s for key in publishers] == [3, 3, 3]
