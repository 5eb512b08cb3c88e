"""`mdame status` explains each of the demo's outcomes on a partition right before publishing
(the shared `rendered` rig), read from the database and the rig's Dagster runs together: the
stage reached, the last run of each job, why nothing was published in the demo summary's
words, what waits until when, and the open alerts with the command that fixes each. Published
(also on the publications materialization's metadata, the UI's view), needs reauth, quota,
budget, a killed run's upload lease and a failed stage; "every topic rejected" is asserted on
the demo's own real runs in tests/pipeline/test_demo_publications.py.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import test_fault_upload_wait as upload_wait
from faultkit import DAY, DIMENSION, KEY, rows, seeding

from mdame_assets.defs.publications.assets import publications
from mdame_assets.partition_runs import status_of
from mdame_cli.main import _parser
from mdame_cli.status import _status, report
from mdame_domain.partition_status import status_rows
from mdame_resources.alerts import raise_environment_alert
from mdame_resources.providers.publisher import OutboxPublisher
from tests.adminkit import as_admin


def _rows(rig) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for what, value in status_rows(status_of(rig.instance, rig.state, KEY)):
        found.setdefault(what, []).append(value)
    return found


def _next_midnight(zone: str) -> datetime:
    local = datetime.now(ZoneInfo(zone)).date() + timedelta(days=1)
    return datetime.combine(local, datetime.min.time(), ZoneInfo(zone)).astimezone(UTC)


def test_a_published_partition_says_so_in_the_cli_and_on_its_materialization(rig):
    met = rig.materialize([publications])
    assert met.success

    found = _rows(rig)

    assert found["stage"] == ["scripts published (1 published)"]
    assert found["published"] == ["yes: 1 video"]
    [run] = found["last __ephemeral_asset_job__"]
    assert run.startswith("success ") and met.run_id[:8] in run
    assert found["waits"] == ["nothing"] and found["alerts"] == ["none open"]
    # The UI's view: the same rows on the latest materialization, as the step ended.
    [materialization] = met.asset_materializations_for_node("publications")
    table = materialization.metadata["status"].value
    assert "**2026-11-29\\|science**" in table and "| published | yes: 1 video |" in table
    assert "| last __ephemeral_asset_job__ | started (not ended), run " in table  # its own run
    # The command's report: one table per partition, headed by its key.
    [text] = report(rig.instance, rig.state, DAY, [DIMENSION])
    lines = text.splitlines()
    assert lines[0] == KEY and ["published", "yes:", "1", "video"] in [ln.split() for ln in lines]


def test_an_account_needing_reauth_is_named_with_its_fix(rig):
    [account] = rig.state.list_accounts(DIMENSION)
    with seeding(rig.state) as fenced:
        fenced.mark_needs_reauth(account.id, "invalid_grant")
        # As the publisher raises it when the platform refuses the grant.
        raise_environment_alert(
            fenced,
            DIMENSION,
            "reauth_needed",
            f"account {account.handle}: invalid_grant; run `mdame accounts connect {DIMENSION} "
            f"--account {account.handle}`",
        )
    assert rig.materialize([publications]).success  # skipped: nothing half done

    found = _rows(rig)

    assert found["published"] == [
        f"no: account skipped: {account.handle} (needs reauth) may not be published to now"
    ]
    [alert] = found["alert reauth_needed"]
    assert "publishing account needs re-authorization" in alert
    assert found["  fix"] == [f"mdame accounts connect {DIMENSION} --account {account.handle}"]


def test_an_account_out_of_quota_waits_for_its_reset(rig):
    [account] = rig.state.list_accounts(DIMENSION)
    as_admin(rig.state).upsert_dimension_account(
        DIMENSION, account.platform, account.handle, 10_000, daily_posts=0
    )
    assert rig.materialize([publications]).success

    found = _rows(rig)

    assert found["published"] == [
        f"no: upload quota used up for {account.handle} (the rest publishes once the quota resets)"
    ]
    reset = _next_midnight("America/Los_Angeles")
    assert found["waits"] == [
        f"account {account.handle}'s upload quota reset until {reset:%Y-%m-%d %H:%M:%S} UTC"
    ]
    assert found["  fix"] == ["none: publishing resumes once the quota resets (see waits)"]
    assert "upload quota exhausted" in found["alert quota_exhausted"][0]


def test_the_budget_cap_waits_for_the_next_days_budget(rig):
    with seeding(rig.state) as fenced:
        # A paid call the cap refuses, through the RPC the paid-call client calls.
        start = fenced.begin_paid_call(DIMENSION, "voice:tts", "gemini:tts", "h", 10**9, None, 3, 0)
        assert start.action == "budget_exhausted"
        raise_environment_alert(fenced, DIMENSION, "budget_cap", "daily budget exhausted")

    found = _rows(rig)

    assert found["published"][0].startswith("no: the daily budget cap (daily_budget_usd)")
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    assert found["waits"] == [
        f"the next day's budget (daily_budget_usd) until {tomorrow} 00:00:00 UTC"
    ]
    assert found["  fix"] == [
        f"mdame dimensions sync after raising daily_budget_usd in dimensions/{DIMENSION}.yaml "
        "(or wait for tomorrow's budget)"
    ]
    assert found["runs"] == ["none recorded for this partition"]


def test_a_killed_runs_upload_lease_is_a_wait_with_its_end(rig):
    key = upload_wait._killed_mid_upload(rig)
    [(lease_end,)] = rows(
        rig.db.owner,
        "SELECT lease_expires_at FROM mdame.provider_attempts WHERE work_key = %s",
        (key,),
    )
    assert rig.materialize([publications]).success  # met the lease: waits, no failure

    found = _rows(rig)

    until = f"{lease_end.astimezone(UTC):%H:%M:%S} UTC"
    assert found["published"] == [
        f"no: waiting for an interrupted upload to settle until {until}; run again after that"
    ]
    assert found["waits"] == [
        f"an interrupted upload until {lease_end.astimezone(UTC):%Y-%m-%d} {until}"
    ]
    assert found["stage"] == ["scripts publishing (1 publishing)"]


class _ChannelDown(OutboxPublisher):
    """A channel that fails every upload with an error of its own."""

    def upload(self, job):  # type: ignore[no-untyped-def]
        raise RuntimeError("the channel answered 500 three times")


def test_a_failed_stage_names_its_step_and_error(rig):
    met = rig.materialize([publications], youtube_publisher=_ChannelDown())
    assert not met.success

    found = _rows(rig)

    [run] = found["last __ephemeral_asset_job__"]
    assert run.startswith("failure ") and met.run_id[:8] in run
    assert run.endswith(": publications: RuntimeError: the channel answered 500 three times")
    assert found["published"][0].startswith(
        "no: a stage failed: __ephemeral_asset_job__: publications"
    )
    assert found["stage"] == ["scripts publishing (1 publishing)"]
    # The upload it began and never settled, as a crash leaves it: its lease is a wait.
    assert [w.split(" until ")[0] for w in found["waits"]] == ["an interrupted upload"]


def test_the_command_is_wired_and_refuses_an_unknown_dimension(rig):
    args = _parser().parse_args(["status", "--dimension", DIMENSION, "--day", "2026-11-29"])
    assert args.func is _status and args.day == date(2026, 11, 29)
    try:
        report(rig.instance, rig.state, DAY, ["nope"])
    except LookupError as exc:
        assert str(exc).startswith("unknown dimension 'nope' (known: ") and DIMENSION in str(exc)
    else:
        raise AssertionError("an unknown dimension was reported")
