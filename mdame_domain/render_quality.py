"""A render's technical quality gates, as plain rules over one MediaAnalysis.

Each gate is one named check (an asset check on `renders` and a line of the technical review):
its problems (empty: passed) and the numbers a dashboard charts. The thresholds, the check
names and POLICY_VERSION form the acceptance context a review is recorded under.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from mdame_domain.media_profile import SHORTS, MediaProfile
from mdame_domain.probe import MediaAnalysis

# Bump when a threshold or a rule changes: reviews record under which policy they passed.
POLICY_VERSION = "render-quality/1"

FORMAT, DURATION, LOUDNESS = "render_format", "render_duration", "render_loudness"
BLACK, FREEZE, SILENCE = "render_black", "render_freeze", "render_silence"
AV_SYNC, SCENES = "render_av_sync", "render_scenes"
QUALITY_CHECKS: tuple[str, ...] = (
    FORMAT, DURATION, LOUDNESS, BLACK, FREEZE, SILENCE, AV_SYNC, SCENES,
)  # fmt: skip

# Streaming practice: -14 LUFS integrated (+-1 LU) and at most -1 dBTP true peak.
TARGET_LUFS, LUFS_TOLERANCE, MAX_TRUE_PEAK_DBTP = -14.0, 1.0, -1.0
# A viewer reads a longer black as a broken video, a longer freeze as a stall, a longer
# silence as a dropout (speech pauses are well under a second).
MAX_BLACK_S, MAX_FREEZE_S, MAX_SILENCE_S = 0.5, 2.0, 1.5
# The render pads or cuts the voice to the picture; more than this apart is a muxing fault
# (AAC priming alone is ~0.02 s).
MAX_AV_DRIFT_S = 0.1
# A scene may differ from its plan by the render's frame quantisation (a frame at 24 fps) and
# the whole by two frames.
SCENE_TOLERANCE_S = 0.05


@dataclass(frozen=True)
class QualityRules:
    width: int = 1080
    height: int = 1920
    video_codec: str = "h264"
    audio_codec: str = "aac"
    fps: float = 24.0
    pix_fmt: str = "yuv420p"
    sar: str = "1:1"
    min_duration_s: float = 15.0
    max_duration_s: float = 180.0
    target_lufs: float = TARGET_LUFS
    lufs_tolerance: float = LUFS_TOLERANCE
    max_true_peak_dbtp: float = MAX_TRUE_PEAK_DBTP
    max_black_s: float = MAX_BLACK_S
    max_freeze_s: float = MAX_FREEZE_S
    max_silence_s: float = MAX_SILENCE_S
    max_av_drift_s: float = MAX_AV_DRIFT_S
    scene_tolerance_s: float = SCENE_TOLERANCE_S

    def acceptance_context(self) -> dict[str, object]:
        """What a technical review was judged under: policy, checks and every threshold."""
        return {"policy": POLICY_VERSION, "checks": list(QUALITY_CHECKS), "rules": asdict(self)}


def rules_for(duration_range_s: Sequence[float], profile: MediaProfile = SHORTS) -> QualityRules:
    """The rules for a dimension: its duration range and the profile's frame, everything else
    the defaults."""
    low, high = duration_range_s
    return QualityRules(
        width=profile.width,
        height=profile.height,
        min_duration_s=float(low),
        max_duration_s=float(high),
    )


def _fmt(value: float | None, unit: str) -> str:
    return "none" if value is None else f"{value:.2f}{unit}"


def media_problems(a: MediaAnalysis, rules: QualityRules) -> dict[str, list[str]]:
    """Per check (all but render_scenes), what is wrong with the analysed file."""
    out: dict[str, list[str]] = {name: [] for name in QUALITY_CHECKS if name != SCENES}
    fmt = out[FORMAT]
    if (a.width, a.height) != (rules.width, rules.height):
        fmt.append(f"frame is {a.width}x{a.height}, expected {rules.width}x{rules.height}")
    if a.video_codec != rules.video_codec:
        fmt.append(f"video codec is {a.video_codec}, expected {rules.video_codec}")
    if a.audio_codec is None:
        fmt.append("no audio track")
    elif a.audio_codec != rules.audio_codec:
        fmt.append(f"audio codec is {a.audio_codec}, expected {rules.audio_codec}")
    if abs(a.fps - rules.fps) > 0.01:
        fmt.append(f"frame rate is {a.fps:.3f} fps, expected {rules.fps:g}")
    if a.pix_fmt != rules.pix_fmt:
        fmt.append(f"pixel format is {a.pix_fmt}, expected {rules.pix_fmt}")
    if a.sar != rules.sar:
        fmt.append(f"sample aspect ratio is {a.sar}, expected {rules.sar}")
    if not rules.min_duration_s <= a.duration_s <= rules.max_duration_s:
        out[DURATION].append(
            f"duration {a.duration_s:.2f}s outside "
            f"{rules.min_duration_s:g}-{rules.max_duration_s:g}s"
        )
    loud = out[LOUDNESS]
    if a.integrated_lufs is None or a.true_peak_dbtp is None:
        loud.append("no audio to measure")
    else:
        if not math.isfinite(a.integrated_lufs) or (
            abs(a.integrated_lufs - rules.target_lufs) > rules.lufs_tolerance
        ):
            loud.append(
                f"integrated loudness {a.integrated_lufs:.1f} LUFS, expected "
                f"{rules.target_lufs:g} +-{rules.lufs_tolerance:g}"
            )
        if a.true_peak_dbtp > rules.max_true_peak_dbtp:
            loud.append(f"true peak {a.true_peak_dbtp:.1f} dBTP above {rules.max_true_peak_dbtp:g}")
    for name, value, limit, what in (
        (BLACK, a.longest_black_s, rules.max_black_s, "black"),
        (FREEZE, a.longest_freeze_s, rules.max_freeze_s, "frozen"),
        (SILENCE, a.longest_silence_s, rules.max_silence_s, "silent"),
    ):
        if value > limit:
            out[name].append(f"{value:.2f}s {what} stretch (max {limit:g}s)")
    drift = a.av_drift_s
    if drift is None:
        out[AV_SYNC].append("no audio track")
    elif drift > rules.max_av_drift_s:
        out[AV_SYNC].append(
            f"audio {_fmt(a.audio_duration_s, 's')} vs video {a.video_duration_s:.2f}s: "
            f"{drift:.2f}s apart (max {rules.max_av_drift_s:g}s)"
        )
    return out


def scene_problems(
    planned_s: Sequence[float],
    used_s: Sequence[float] | None,
    video_duration_s: float,
    tolerance_s: float = SCENE_TOLERANCE_S,
) -> list[str]:
    """The render's scenes against the plan: as many, each as long, and the picture as long
    as the plan in total."""
    if used_s is None:
        return ["the render recorded no scene durations"]
    problems = []
    if len(used_s) != len(planned_s):
        problems.append(f"{len(used_s)} scenes rendered, the plan has {len(planned_s)}")
    else:
        for i, (plan, used) in enumerate(zip(planned_s, used_s, strict=True)):
            if abs(plan - used) > tolerance_s:
                problems.append(f"scene {i} rendered {used:.2f}s, planned {plan:.2f}s")
    total = math.fsum(planned_s)
    if abs(video_duration_s - total) > 2 * tolerance_s:
        problems.append(f"video is {video_duration_s:.2f}s, the plan adds up to {total:.2f}s")
    return problems


def technical_problems(
    analysis: MediaAnalysis,
    rules: QualityRules,
    planned_s: Sequence[float],
    used_s: Sequence[float] | None,
) -> dict[str, list[str]]:
    """Per quality check, the problems of one analysed render (empty lists: it passes): the
    technical review's judgement, which the renders asset, its checks and the bench share."""
    found = media_problems(analysis, rules)
    found[SCENES] = scene_problems(
        planned_s, used_s, analysis.video_duration_s, rules.scene_tolerance_s
    )
    return found


def chart_values(a: MediaAnalysis, rules: QualityRules) -> dict[str, dict[str, float]]:
    """Per check, the numbers a dashboard charts for one render (bigger is worse except
    where named)."""
    lufs_off = (
        abs(a.integrated_lufs - rules.target_lufs)
        if a.integrated_lufs is not None and math.isfinite(a.integrated_lufs)
        else 99.0
    )
    return {
        FORMAT: {"width": a.width, "height": a.height, "fps": a.fps},
        DURATION: {"duration_s": a.duration_s},
        LOUDNESS: {
            "integrated_lufs": a.integrated_lufs if a.integrated_lufs is not None else -99.0,
            "lufs_off_target": lufs_off,
            "true_peak_dbtp": a.true_peak_dbtp if a.true_peak_dbtp is not None else -99.0,
        },
        BLACK: {"longest_black_s": a.longest_black_s},
        FREEZE: {"longest_freeze_s": a.longest_freeze_s},
        SILENCE: {"longest_silence_s": a.longest_silence_s},
        AV_SYNC: {"av_drift_s": a.av_drift_s if a.av_drift_s is not None else 99.0},
    }
