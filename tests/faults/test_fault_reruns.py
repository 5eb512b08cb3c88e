"""A manual re-run of a finished partition changes nothing: no row, no file.

tests/pipeline/test_asset_graph.py re-runs a finished partition from scratch and compares row
counts and outbox files. This checks harder, from a partition finished by the publishing stage
alone: every row of every table is digested (a transition, a bump or a rewritten result would
show), the work-unit events must not grow, and every file under the home (media store, derived
memos, outbox) keeps its size and modification time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from faultkit import file_fingerprints, table_fingerprints

from mdame_assets.defs.publications.assets import publications
from mdame_cli.runs import whole_graph
from mdame_domain.outbox import list_outbox
from tests.chaos.invariants import violations


def test_manual_rerun_of_a_finished_partition_adds_no_row_and_no_file(rig):
    assert rig.materialize([publications]).success
    assert rig.script().state == "published"
    assert violations(rig.db.app, rig.home, rig.home / "media") == []
    rows, files = table_fingerprints(rig.db.app), file_fingerprints(rig.home)

    manual = rig.materialize(whole_graph())  # "Materialize all" for the partition, in the UI or CLI

    assert manual.success, [e.message for e in manual.all_events if e.is_failure]
    assert table_fingerprints(rig.db.app) == rows
    assert file_fingerprints(rig.home) == files


# In this file (not one of its own) so that it shares its worker's `rendered` partition.
def test_published_at_is_the_moment_of_publishing(rig):
    """metadata.json's `published_at` is when the video was published, not the partition's
    end of day (the next midnight, which looked future-dated); beside it, the resource the
    channel was sent, its description carrying the publication's marker."""
    before = datetime.now(UTC).replace(microsecond=0)
    assert rig.materialize([publications]).success
    after = datetime.now(UTC)
    entries = list_outbox(rig.home / "outbox")
    assert entries
    for entry in entries:
        document = json.loads(entry.metadata_path.read_text(encoding="utf-8"))
        published = datetime.fromisoformat(document["published_at"])
        assert before <= published <= after + timedelta(seconds=1), document["published_at"]
        assert document["status"]["containsSyntheticMedia"] is True
        assert "mdame:" in document["description"] == document["snippet"]["description"]
