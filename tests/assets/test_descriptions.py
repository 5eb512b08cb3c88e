"""The UI explains itself: every asset, asset check, job, sensor and schedule of both code
locations carries a description (what it does), and every asset check also says what to do
when it fails. A definition added without one fails here, by name.

What is read is what the UI shows: Dagster's own description of each definition, taken from
the loaded Definitions (an asset's or check's docstring when no description= is given; sensors
and schedules only take description=).
"""

from __future__ import annotations

import importlib
import re

import dagster as dg
import pytest

from mdame_runtime.locations import LOCATION_MODULES

LOCATIONS = LOCATION_MODULES

# Texts that stand in for a description without being one (the UI's own is the first).
PLACEHOLDERS = {"no description provided", "description", "todo", "tbd", "fixme", "xxx", "n/a"}
PLACEHOLDER_PREFIX = re.compile(r"^(todo|tbd|fixme|xxx)\b", re.IGNORECASE)
MIN_WORDS = 4  # fewer cannot say what a definition does
# An asset check's description says what the operator does when it fails, in these words.
WHEN_IT_FAILS = re.compile(r"\bwhen it fails\b", re.IGNORECASE)


def described(location: str) -> dict[str, str | None]:
    """'<kind> <name>' -> the description the UI shows, for every definition of the location
    (an asset Dagster made up for a dependency another location defines is left out: the UI
    shows that location's description)."""
    repo = importlib.import_module(LOCATIONS[location]).defs().get_repository_def()
    graph = repo.asset_graph
    found: dict[str, str | None] = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if not node.assets_def.is_auto_created_stub:
            found[f"asset {key.to_user_string()}"] = node.description
    for check_key in graph.asset_check_keys:
        name = f"{check_key.asset_key.to_user_string()}:{check_key.name}"
        found[f"asset check {name}"] = graph.get_check_spec(check_key).description
    for job in repo.get_all_jobs():
        if not job.name.startswith("__"):  # Dagster's implicit asset jobs
            found[f"job {job.name}"] = job.description
    for schedule in repo.schedule_defs:
        found[f"schedule {schedule.name}"] = schedule.description
    for sensor in repo.sensor_defs:
        found[f"sensor {sensor.name}"] = sensor.description
    return found


def missing(description: str | None) -> str | None:
    """Why a description says nothing, or None when it says something."""
    text = " ".join((description or "").split())
    if not text:
        return "no description"
    if text.strip(" .").lower() in PLACEHOLDERS or PLACEHOLDER_PREFIX.match(text):
        return f"a placeholder ({text!r})"
    if len(text.split()) < MIN_WORDS:
        return f"too short to say what it does ({text!r})"
    return None


@pytest.mark.parametrize("location", sorted(LOCATIONS))
def test_every_definition_says_what_it_does(location: str) -> None:
    found = described(location)
    kinds = {name.rsplit(" ", 1)[0] for name in found}
    # The walk itself reached every kind (the orchestrator holds them all).
    if location == "orchestrator":
        assert kinds == {"asset", "asset check", "job", "schedule", "sensor"}
    bad = {name: why for name, text in sorted(found.items()) if (why := missing(text))}
    assert not bad, f"the {location} code location has definitions the UI cannot explain:\n" + (
        "\n".join(f"  {name}: {why}" for name, why in bad.items())
    )


@pytest.mark.parametrize("location", sorted(LOCATIONS))
def test_every_asset_check_says_what_to_do_when_it_fails(location: str) -> None:
    checks = {
        name: text for name, text in described(location).items() if name.startswith("asset check")
    }
    assert checks, f"the {location} code location has no asset checks to read"
    silent = sorted(name for name, text in checks.items() if not WHEN_IT_FAILS.search(text or ""))
    assert not silent, (
        f"these asset checks of the {location} code location do not say what to do "
        "'when it fails':\n" + "\n".join(f"  {name}" for name in silent)
    )


@pytest.mark.parametrize(
    ("description", "verdict"),
    [
        (None, "no description"),
        ("   ", "no description"),
        ("No description provided", "a placeholder"),
        ("TODO: say what this does", "a placeholder"),
        ("Scores trends.", "too short"),
        ("Scored trend items for one dimension and day.", None),
    ],
)
def test_what_counts_as_no_description(description: str | None, verdict: str | None) -> None:
    why = missing(description)
    assert (why is None) if verdict is None else (why or "").startswith(verdict)


def test_a_definition_without_a_description_is_named() -> None:
    @dg.asset
    def undescribed() -> None:
        pass

    node = dg.Definitions(assets=[undescribed]).get_repository_def().asset_graph
    assert missing(node.get(undescribed.key).description) == "no description"
