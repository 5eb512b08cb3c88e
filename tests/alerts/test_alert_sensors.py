"""The alert sensors, evaluated the way the daemon does, on a real failed run."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg
import psycopg

from fakes.telegram import TelegramServer
from mdame_assets.defs.alerts import alert_sweep_sensor, run_failure_alert_sensor
from mdame_assets.jobs import DIMENSION_TAG
from mdame_core.state import StateStore
from mdame_resources.alerts import raise_alert
from mdame_resources.notify import TelegramNotifier
from mdame_resources.state import StateStoreResource, close_clients
from tests.conftest import DbUrls


@dg.asset
def doomed() -> None:
    raise RuntimeError("the clips of scene 3 are missing")


def _failed_run(instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [doomed],
        instance=instance,
        tags={DIMENSION_TAG: "tech", "dagster/partition": "2026-11-30|tech"},
        raise_on_error=False,
    )


def test_a_failed_run_alerts_once_a_day(
    fresh_db: DbUrls, telegram_env: TelegramServer, owner: psycopg.Connection
) -> None:
    resources = {
        "state": StateStoreResource(database_url=fresh_db.app),
        "notifier": TelegramNotifier(),
    }
    try:
        with dg.instance_for_test() as instance:
            result = _failed_run(instance)
            assert not result.success
            context = dg.build_run_status_sensor_context(
                sensor_name=run_failure_alert_sensor.name,
                dagster_instance=instance,
                dagster_run=result.dagster_run,
                dagster_event=result.get_run_failure_event(),
                resources=resources,
            ).for_run_failure()
            run_failure_alert_sensor(context)
            run_failure_alert_sensor(context)  # another failure that day: counted, not sent
    finally:
        close_clients()
    (sent,) = telegram_env.messages
    text = sent.fields["text"]
    assert text.startswith("MD-AME alert · tech · run failed")
    assert "for partition 2026-11-30|tech" in text and result.dagster_run.job_name in text
    assert owner.execute("SELECT occurrences FROM mdame.alerts").fetchone() == (2,)


def test_the_sweep_sensor_delivers_what_an_outage_left(
    fresh_db: DbUrls,
    state: StateStore,
    stage: Callable[[str], StateStore],
    telegram_env: TelegramServer,
) -> None:
    telegram_env.set_down(503)
    notifier = TelegramNotifier(backoff_s=0.01, server_retries=0)
    tech = stage("tech")  # the stage that met the cap holds the dimension's lock
    assert raise_alert(tech, notifier, "tech", "budget_cap", "cap of $1.00") == "undelivered"
    telegram_env.set_down(None)
    resources = {"state": StateStoreResource(database_url=fresh_db.app), "notifier": notifier}
    try:
        with dg.instance_for_test() as instance:
            context = dg.build_sensor_context(instance=instance, resources=resources)
            skipped = alert_sweep_sensor(context)
    finally:
        close_clients()
    assert "1 delivered" in str(skipped)
    (sent,) = telegram_env.messages
    assert "budget cap" in sent.fields["text"]
