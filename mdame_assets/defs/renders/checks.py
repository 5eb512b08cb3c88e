"""Quality gates on renders: blocking asset checks, one per property, from ONE
analysis per render.

render_probe: the approved render is still there, still the approved bytes (hash first) and
readable. Then one check per property (render_quality): format, duration, loudness, black,
freeze, silence, A/V drift and scenes against the plan. While a file's hash matches its
render's, the analysis made at render time of exactly those bytes is read from the payload;
a changed or older file is analysed once here (ffprobe and one ffmpeg decode). Each check
carries numbers a dashboard charts (the partition's worst) and a per-render table.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from mdame_assets.defs.renders.assets import planned_scene_durations, renders
from mdame_core.state import WorkUnit
from mdame_domain import render_quality as q
from mdame_domain.media_profile import media_profile
from mdame_domain.media_store import LocalMediaStore, MediaProblem, MediaStore
from mdame_domain.mediatools import MediaToolError
from mdame_domain.probe import MediaAnalysis, analyze_media
from mdame_resources.media import MediaStoreResource
from mdame_resources.state import StateStoreResource
from mdame_runtime.executors import RENDER_STEP_TAGS
from mdame_runtime.step import Step, read_step

PROBE = "render_probe"
CHECKS: tuple[str, ...] = (PROBE, *q.QUALITY_CHECKS)
# Per check, how the per-render numbers fold into one chartable value for the partition.
_WORST: dict[str, dict[str, Any]] = {
    q.FORMAT: {},
    q.DURATION: {"duration_s": (max, "longest_duration_s")},
    q.LOUDNESS: {
        "lufs_off_target": (max, "worst_lufs_off_target"),
        "true_peak_dbtp": (max, "highest_true_peak_dbtp"),
        "integrated_lufs": (min, "lowest_integrated_lufs"),
    },
    q.BLACK: {"longest_black_s": (max, "longest_black_s")},
    q.FREEZE: {"longest_freeze_s": (max, "longest_freeze_s")},
    q.SILENCE: {"longest_silence_s": (max, "longest_silence_s")},
    q.AV_SYNC: {"av_drift_s": (max, "worst_av_drift_s")},
    q.SCENES: {"scene_offset_s": (max, "worst_scene_offset_s")},
}


class _Tally:
    """One check's outcome over the partition's renders."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.per_render: dict[str, dict[str, Any]] = {}

    def add(self, render_id: int, found: list[str], values: dict[str, float]) -> None:
        self.problems += [f"render {render_id}: {p}" for p in found]
        self.per_render[str(render_id)] = {**values, "passed": not found}


def _analysis(render: WorkUnit, store: MediaStore) -> tuple[MediaAnalysis | None, list[str]]:
    """The file's analysis and its integrity problems. Hash first: the stored analysis is only
    of the approved bytes. Changed bytes still on this host (the local store) are analysed, so
    each property's check says what is wrong with them too."""
    uri, sha256 = render.payload["uri"], render.payload["sha256"]
    try:
        path = store.verified_path(uri, sha256)
    except MediaProblem as exc:
        local = store.path_for(uri) if isinstance(store, LocalMediaStore) else None
        if local is None or not local.is_file():
            return None, [str(exc)]
        path, problems = local, [str(exc)]
    else:
        problems = []
        stored = render.payload.get("probe")
        if isinstance(stored, dict):
            try:
                return MediaAnalysis.from_json(stored), problems
            except (TypeError, ValueError):
                pass  # an older payload: analyse the file
    try:
        return analyze_media(str(path)), problems
    except MediaToolError as exc:
        return None, [*problems, f"not a readable video: {exc.reason}"]


def _scene_offset(planned: list[float], used: list[float] | None) -> float:
    if used is None or len(used) != len(planned):
        return 99.0
    return max((abs(a - b) for a, b in zip(planned, used, strict=True)), default=0.0)


def _evaluate(step: Step, media: MediaStoreResource, tallies: dict[str, _Tally]) -> int:
    rules = q.rules_for(step.dimension.duration_range_s, media_profile())
    checked = 0
    for script in step.units("script"):
        render_id = script.result.get("render_id")
        if render_id is None:
            continue
        render = step.state.get_work_unit("render", render_id)
        if render is None:
            tallies[PROBE].add(render_id, ["does not exist"], {})
            continue
        if render.state != "approved":
            continue  # rejected or failed renders are never published: nothing to gate
        checked += 1
        analysis, integrity = _analysis(render, media.store())
        tallies[PROBE].add(render.id, integrity, {})
        if analysis is None:
            for name in q.QUALITY_CHECKS:
                tallies[name].add(render.id, ["no readable file to check"], {})
            continue
        used = render.payload.get("scene_durations_s")
        planned = planned_scene_durations(step.state, script)
        found = q.technical_problems(analysis, rules, planned, used)
        values: dict[str, dict[str, float]] = q.chart_values(analysis, rules)
        values[q.SCENES] = {
            "scene_offset_s": _scene_offset(planned, used),
            "scenes_rendered": len(used) if used is not None else 0,
            "scenes_planned": len(planned),
        }
        for name in q.QUALITY_CHECKS:
            tallies[name].add(render.id, found[name], values[name])
    return checked


BLOCKING = "Blocking: the partition's publications wait, with a check_blocked alert."


def _described(what: str, rule: str) -> str:
    """A quality check's description: what it checks, and what to do when it fails (an approved
    render passed the same rule when it was made)."""
    return (
        f"{what} {BLOCKING} When it fails, the problems name each render: it passed this when "
        f"approved, so its file changed since (render_probe fails too: see there) or {rule}."
    )


_PROBE_DESCRIPTION = (
    "Each approved render is in the media store, its bytes the approved SHA-256, and readable "
    f"by ffprobe. {BLOCKING} When it fails, nothing is needed while nothing was published "
    "from the render: the next publishing run renders it again. One a publication names is "
    "never remade: put its approved bytes back in the media store."
)
_ONLY_WITH_CODE = (
    "the rule did, in mdame_domain/render_quality.py (a new POLICY_VERSION): report it"
)
DESCRIPTIONS = {
    PROBE: _PROBE_DESCRIPTION,
    q.FORMAT: _described(
        "Each approved render has the media profile's frame (MDAME_MEDIA_PROFILE; shorts: "
        "1080x1920), H.264 and AAC, 24 fps, yuv420p, square pixels.",
        "MDAME_MEDIA_PROFILE did: set it back to the profile it was rendered under",
    ),
    q.DURATION: _described(
        "Each approved render's length lies within the dimension's duration_range_s (default "
        "15-180 s).",
        "duration_range_s did: put back the range it was rendered under (the dimension's YAML, "
        "then `mdame dimensions sync`)",
    ),
    q.LOUDNESS: _described(
        f"Each approved render measures {q.TARGET_LUFS:g} LUFS +-{q.LUFS_TOLERANCE:g} integrated "
        f"and a true peak at most {q.MAX_TRUE_PEAK_DBTP:g} dBTP.",
        _ONLY_WITH_CODE,
    ),
    q.BLACK: _described(
        f"No approved render has a black stretch over {q.MAX_BLACK_S} s.", _ONLY_WITH_CODE
    ),
    q.FREEZE: _described(
        f"No approved render has a frozen stretch over {q.MAX_FREEZE_S} s.", _ONLY_WITH_CODE
    ),
    q.SILENCE: _described(
        f"No approved render has a silence over {q.MAX_SILENCE_S} s.", _ONLY_WITH_CODE
    ),
    q.AV_SYNC: _described(
        "Each approved render's audio and video streams last the same within "
        f"{q.MAX_AV_DRIFT_S} s.",
        _ONLY_WITH_CODE,
    ),
    q.SCENES: _described(
        "Each approved render has as many scenes as its plan, each within "
        f"{q.SCENE_TOLERANCE_S} s of its span of the voice and the whole within twice that.",
        "the way scenes are cut on their words did (mdame_domain/scene_spans.py)",
    ),
}


def _result(name: str, tally: _Tally, checked: int) -> dg.AssetCheckResult:
    metadata: dict[str, Any] = {
        "problems": tally.problems,
        "renders_checked": dg.MetadataValue.int(checked),
        "renders_failing": dg.MetadataValue.int(
            sum(1 for r in tally.per_render.values() if not r["passed"])
        ),
        "per_render": dg.MetadataValue.json(tally.per_render),
    }
    for key, (how, label) in _WORST.get(name, {}).items():
        numbers = [r[key] for r in tally.per_render.values() if key in r]
        if numbers:
            metadata[label] = dg.MetadataValue.float(float(how(numbers)))
    return dg.AssetCheckResult(
        check_name=name, asset_key=renders.key, passed=not tally.problems, metadata=metadata
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(name, asset=renders, blocking=True, description=DESCRIPTIONS[name])
        for name in CHECKS
    ],
    can_subset=False,
    op_tags=RENDER_STEP_TAGS,
)
def render_quality(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource, media: MediaStoreResource
) -> Iterator[dg.AssetCheckResult]:
    step = read_step(context, state.get_client(), "render_quality")
    tallies = {name: _Tally() for name in CHECKS}
    checked = _evaluate(step, media, tallies)
    failing = [name for name in CHECKS if tallies[name].problems]
    if failing:  # blocking: the partition's publication waits
        first = tallies[failing[0]].problems[0]
        step.alert("check_blocked", f"render checks failed: {', '.join(failing)}; {first}")
    for name in CHECKS:
        yield _result(name, tallies[name], checked)
