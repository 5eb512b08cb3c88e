"""A manual re-run of a finished partition changes nothing: no row, no file.

tests/pipeline/test_asset_graph.py re-runs a finished partition from scratch and compares row
counts and outbox files. This checks harder, from a partition finished by the publishing stage
alone: every row of every table is digested (a transition, a bump or a rewritten result would
show), the work-unit events must not grow, and every file under the home (media store, derived
memos, outbox) keeps its size and modification time.
"""

from __future__ import annotations

from faultkit import file_fingerprints, table_fingerprints

from mdame_assets.defs.publications.assets import publications
from mdame_assets.runs import whole_graph
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
