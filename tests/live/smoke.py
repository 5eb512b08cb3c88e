"""`make test-live`: one video through the real services, before the first real run.

Only when their credentials are set: otherwise it prints what is missing and exits 0, saying it
skipped. It is never part of `make test` or CI (pytest collects test_*.py only; this file is run
by the Makefile target alone).

1. `mdame doctor` with the production providers: any FAIL stops here (exit 1).
2. One partition (today, UTC) of one dimension, run as `make demo` runs it (content, the GPU
   location's scene_clips, publishing), with the production providers. The dimension's
   configuration in the database is switched to `youtube.privacy_status: private` for the run
   (the upload stays private) and synced back from its YAML afterwards, even on failure.
   Run it before starting the daemon, whose registry sensor would sync the YAML back mid-run.

    make test-live [LIVE_ARGS="--dimension tech --procedural-visuals"]

--procedural-visuals: ffmpeg's procedural clips instead of diffusers, for a host without a
GPU (the provider set "fakes" against the real endpoints: every other provider is the
production one). Exit status: 0 passed or skipped, 1 failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from datetime import UTC, date, datetime

from tests.adminkit import as_admin

REQUIRED = ("GEMINI_API_KEY", "MDAME_YOUTUBE_CLIENT_SECRETS", "MDAME_TELEGRAM_BOT_TOKEN")
# Endpoint overrides that would point the "real" run at a local server instead.
LOCAL_ENDPOINTS = (
    "MDAME_GEMINI_BASE_URL",
    "MDAME_EDGE_TTS_URL",
    "MDAME_YOUTUBE_ROOT_URL",
    "MDAME_GOOGLE_TOKEN_URI",
    "MDAME_TELEGRAM_API_URL",
)


def missing_credentials() -> list[str]:
    from mdame_cli.accounts import default_key_file
    from mdame_domain.credentials import MASTER_KEY_VAR

    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if not os.environ.get(MASTER_KEY_VAR) and not default_key_file().exists():
        missing.append(f"{MASTER_KEY_VAR} (or the key file {default_key_file()})")
    return missing


def granted_dimension(wanted: str | None) -> tuple[str | None, str]:
    """The dimension to publish: `wanted`, or the first active one whose YouTube account has a
    stored grant; (None, why) when there is none."""
    from mdame_core.state import StateStore

    with StateStore(pool_max=1) as state:
        for dim in state.list_dimensions(active_only=True):
            if wanted and dim.slug != wanted:
                continue
            for account in state.list_accounts(dim.slug, active_only=True):
                if account.platform == "youtube" and state.account_credential(account.id):
                    return dim.slug, ""
    what = f"dimension {wanted}" if wanted else "any active dimension"
    return None, (
        f"no stored YouTube grant for {what}: run `mdame accounts connect DIMENSION` "
        "(the dimension's YAML must name a youtube account)"
    )


def skip(why: str) -> int:
    print(f"make test-live: SKIPPED: {why}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dimension", default=os.environ.get("LIVE_DIMENSION") or None)
    parser.add_argument("--procedural-visuals", action="store_true")
    args = parser.parse_args(argv)

    missing = missing_credentials()
    if missing:
        return skip(f"set {', '.join(missing)} to run the live smoke test")
    local = [name for name in LOCAL_ENDPOINTS if os.environ.get(name)]
    if local:
        print(f"make test-live: note: {', '.join(local)} set; those calls go there")
    os.environ["MDAME_PROVIDERS"] = "fakes" if args.procedural_visuals else "production"

    from mdame_core import settings

    settings.mdame_env()
    slug, why = granted_dimension(args.dimension)
    if slug is None:
        return skip(why)

    from mdame_cli.doctor import Options, run_doctor
    from mdame_domain.doctor import exit_code, render_table

    checks = run_doctor(Options(gpu="skip" if args.procedural_visuals else "auto"))
    print(render_table(checks))
    if exit_code(checks):
        print("make test-live: FAILED: `mdame doctor` found problems; nothing was run")
        return 1
    return publish_one(slug, datetime.now(UTC).date())


def publish_one(slug: str, day: date) -> int:
    from mdame_core.dagster_home import apply_dagster_environment

    apply_dagster_environment()
    import dagster as dg

    from mdame_cli.runs import run_partition
    from mdame_core.state import StateStore
    from mdame_domain.dimensions import load_dimension_file
    from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
    from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key

    instance = dg.DagsterInstance.get()
    state = StateStore()
    try:
        sync_registry(as_admin(state))
        config = load_dimension_file(DIMENSIONS_DIR / f"{slug}.yaml")
        private = dataclasses.replace(
            config, youtube=dataclasses.replace(config.youtube, privacy_status="private")
        )
        as_admin(state).upsert_dimension(slug, private.title, private.to_json(), True)
        if slug not in instance.get_dynamic_partitions(DIMENSION_PARTITION):
            instance.add_dynamic_partitions(DIMENSION_PARTITION, [slug])
        key = str(partition_key(day, slug))
        print(f"make test-live: {key}: content -> scene clips -> publishing (private)")
        outcome = run_partition(instance, key, state)
        dim = state.get_dimension(slug)
        videos = [
            video_id
            for script in state.list_work_units(
                "script", dimension_id=dim.id if dim else 0, partition_date=day, state="published"
            )
            for video_id in script.result.get("video_ids", [])
        ]
    finally:
        sync_registry(as_admin(state))  # the dimension's own configuration again
        state.close()
    if not outcome.ok or not videos:
        print(f"make test-live: FAILED: {outcome.error or 'no video was published'}")
        return 1
    print(f"make test-live: PASSED in {outcome.seconds:.0f}s {outcome.stage_seconds}")
    for video_id in videos:
        print(f"  published privately: https://youtu.be/{video_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
