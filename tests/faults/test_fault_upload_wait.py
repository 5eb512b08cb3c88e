"""A run that meets a killed run's live upload lease waits; it does not fail.

A publishing run was killed after it began its upload: the attempt is 'submitted' under the
killed run's lock token, and its lease (that lock's expiry plus the publisher's upload grace)
still runs after the lock itself expired, because the channel may still answer the killed
request until then. The next run must take the upload over only after that lease, so it ends
with a typed "not yet" saying until when: its run succeeds, no failure alert is raised, the
hop sensor requests the partition again once the time has passed (and not before), `make
demo`'s summary says "waiting for an interrupted upload to settle until HH:MM:SS", and the run
after the wait publishes the video exactly once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg
from faultkit import DAY, DIMENSION, end_attempt_leases, rows, seeding

from mdame_assets.defs.hops import awaiting_publishing, hop_decision
from mdame_assets.defs.publications.assets import publications
from mdame_cli.demo import EXIT_WAITING, partition_facts, summary
from mdame_cli.runs import Outcome
from mdame_domain.idempotency import idempotency_key
from mdame_domain.outbox import list_outbox
from mdame_domain.publish_summary import unpublished_reason
from mdame_domain.retry_window import RetryWindow
from mdame_resources.providers.publisher import OutboxPublisher
from mdame_runtime.partition_keys import partition_key

GRACE_S = 600  # the killed run's upload grace: its lease outlives its lock by ten minutes


def _killed_mid_upload(rig) -> str:
    """What a publishing run killed right after begin_bucket_upload leaves: the attempt
    'submitted' under its lock token, with the lease of that lock plus the grace."""
    script = rig.script()
    render = rig.state.get_work_unit("render", script.result["render_id"])
    [account] = rig.state.list_accounts(DIMENSION)
    key = idempotency_key(script.idempotency_key, "publication", account.platform, account.handle)
    payload = {
        "script_id": script.id,
        "render_id": render.id,
        "account_id": account.id,
        "content_sha256": render.payload["sha256"],
    }
    publisher = OutboxPublisher()
    with seeding(rig.state) as killed:
        start = killed.begin_bucket_upload(
            key,
            payload,
            publisher.upload_quota_bucket,
            publisher.upload_quota_units,
            publisher.provider_name,
            ["technical", "content"],
            GRACE_S,
        )
        assert start.action == "submit", start
    return key


def test_a_run_meeting_a_killed_runs_lease_waits_then_the_next_publishes_once(rig):
    key = _killed_mid_upload(rig)
    [(lease_end,)] = rows(
        rig.db.owner,
        "SELECT lease_expires_at FROM mdame.provider_attempts WHERE work_key = %s",
        (key,),
    )
    assert lease_end > datetime.now(UTC) + timedelta(seconds=GRACE_S / 2)

    met = rig.materialize([publications])

    # Waiting is not failing: the run succeeded, and its materialization says until when.
    assert met.success, [e.message for e in met.all_events if e.is_failure]
    [materialization] = met.asset_materializations_for_node("publications")
    [waiting] = materialization.metadata["waiting"].value.values()
    assert f"until {lease_end.astimezone(UTC):%H:%M:%S} UTC" in waiting
    assert rig.script().state == "publishing"
    assert rows(rig.db.owner, "SELECT count(*) FROM mdame.alerts") == [(0,)]
    assert list_outbox(rig.home / "outbox") == []

    # make demo's summary names the wait, and exits EXIT_WAITING, not as a failure.
    pkey = str(partition_key(DAY, DIMENSION))
    facts = partition_facts(rig.state, Outcome(pkey, ok=True, seconds=1.0, stage_seconds={}))
    verdict = unpublished_reason(facts)
    assert verdict.waiting and not verdict.expected
    assert verdict.reason == (
        f"waiting for an interrupted upload to settle until {lease_end.astimezone(UTC):%H:%M:%S}"
        " UTC; run again after that"
    )
    lines, code = summary([facts], [], 1.0, "the outbox")
    assert code == EXIT_WAITING, lines
    assert any("not published yet: waiting for an interrupted upload" in line for line in lines)

    # The hop sensor requests nothing before the lease's end, and at once after it.
    [work] = rig.state.partitions_with_scripts_in(awaiting_publishing(rig.state))
    assert work.waits_until == lease_end
    runs = rig.instance.get_run_records(dg.RunsFilter())

    def decision(now: datetime):
        return hop_decision(
            "publishing", pkey, work.last_update, runs, now, RetryWindow(), work.waits_until
        )

    before = decision(datetime.now(UTC))
    assert before.run_key is None
    assert "waiting for an interrupted upload to settle until" in before.reason
    after = decision(lease_end + timedelta(seconds=1))
    assert after.run_key is not None and after.run_key.endswith(f":after:{lease_end.isoformat()}")

    end_attempt_leases(rig.db.owner, key)  # the killed run's lease is over
    done = rig.materialize([publications])

    assert done.success, [e.message for e in done.all_events if e.is_failure]
    assert rig.script().state == "published"
    assert len(list_outbox(rig.home / "outbox")) == 1
    assert rows(
        rig.db.owner, "SELECT count(*) FROM mdame.publications WHERE state = 'published'"
    ) == [(1,)]
