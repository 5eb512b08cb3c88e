"""Where a rendered video actually cuts from one scene's clip to the next, measured on its
frames against the scene clips.

The render shows scene k's clip from the frame its scene starts on: clip frame j (the clip
looped at the render's frame rate, scaled and cropped to the frame) at render frame start + j.
So around each expected cut, the frames before it are scene k-1's clip as it started at the
previous cut found, and from the cut on scene k's clip from its first frame. For every candidate
frame in a window of SEARCH_S either side, the frames are compared with what they would show if
the cut were there (the mean absolute difference of small RGB thumbnails, THUMB_W x THUMB_H,
outside the recorded caption and hook boxes: the clips carry no text); the cut is the candidate
that fits best. Candidates that fit nearly as well (within AMBIGUITY times the best fit's
per-frame difference) cannot be told apart from it: two clips alike there, or still pictures.
Their range is reported, so a judge only fails a cut every plausible reading puts off.

One ffmpeg decode of the render (only the windows' frames are scaled and kept) and one of the
clips as the render loops and trims them, then numpy on a few hundred thumbnails.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from mdame_domain.mediatools import FFMPEG_BASE, run_tool
from mdame_domain.timing import spent

if TYPE_CHECKING:  # numpy is imported where frames are read: importing the product skips it
    import numpy as np

# Bump when what a reading measures changes: a stored reading of another version is redone.
CUTS_VERSION = "scene-cuts/1"
THUMB_W, THUMB_H = 36, 64
# How far from the expected cut a cut is looked for (seconds, each way).
SEARCH_S = 1.0
# Candidates whose fit is within this many times the best fit's per-frame difference of it
# cannot be told from the best.
AMBIGUITY = 3.0
# A best fit worse than this per frame (mean absolute difference, 0-255) is no fit: the frames
# there show neither scene's clip.
MAX_RESIDUAL = 40.0
# Less than this share of the thumbnail left outside the caption boxes: compare it whole.
MIN_UNMASKED = 0.2


@dataclass(frozen=True)
class CutReading:
    """One measured cut: the scene that starts there, where it was looked for, where it was
    found (None: the frames fit neither clip), the range of cuts that fit as well, and the best
    fit's mean difference per frame."""

    scene: int
    expected_s: float
    found_s: float | None
    low_s: float
    high_s: float
    residual: float
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CutReading:
        found = data["found_s"]
        return cls(
            scene=int(data["scene"]),
            expected_s=float(data["expected_s"]),
            found_s=None if found is None else float(found),
            low_s=float(data["low_s"]),
            high_s=float(data["high_s"]),
            residual=float(data["residual"]),
            note=str(data.get("note", "")),
        )


@dataclass(frozen=True)
class CutWindow:
    """The frames read around one expected cut."""

    scene: int  # the scene starting at this cut
    first: int  # the first frame read (a frame of the scene before, whatever the cut)
    last: int  # the last frame read; candidates are first+1 .. last
    expected: int


def cut_windows(
    expected_cuts_s: Sequence[float], duration_s: float, fps: int, search_s: float = SEARCH_S
) -> list[CutWindow]:
    """The frames read around each expected cut: search_s either side, no further than half
    way to the next cut or past the video's ends."""
    total = max(2, round(duration_s * fps))
    reach = max(1, round(search_s * fps))
    cuts = [min(total - 1, max(1, round(c * fps))) for c in expected_cuts_s]
    windows = []
    for k, e in enumerate(cuts):
        low = (cuts[k - 1] + e) // 2 + 1 if k else 1
        high = (e + cuts[k + 1]) // 2 if k + 1 < len(cuts) else total - 1
        first = max(0, max(low, e - reach) - 1)
        last = max(first + 1, min(high, e + reach, total - 1))
        windows.append(CutWindow(k + 1, first, last, e))
    return windows


def select_expression(windows: Sequence[CutWindow]) -> str:
    """ffmpeg's select expression for the windows' frames (commas unescaped)."""
    return "+".join(f"between(n,{w.first},{w.last})" for w in windows)


def window_frames(windows: Sequence[CutWindow]) -> list[int]:
    """The frame numbers the windows read, in order (what a select of them passes)."""
    return sorted({n for w in windows for n in range(w.first, w.last + 1)})


def _mask(boxes: Sequence[Mapping[str, Any]], caption_frame: tuple[int, int]) -> np.ndarray:
    """The thumbnail's pixels (times channels) outside every recorded text box."""
    import numpy as np

    keep = np.ones((THUMB_H, THUMB_W), dtype=bool)
    fw, fh = caption_frame
    for box in boxes:
        try:
            x, y, w, h = (float(box[k]) for k in ("x", "y", "w", "h"))
        except (KeyError, TypeError, ValueError):
            continue
        # A pixel of slack: the outline and anti-aliasing reach past the ink box.
        x0, x1 = math.floor(x * THUMB_W / fw) - 1, math.ceil((x + w) * THUMB_W / fw) + 1
        y0, y1 = math.floor(y * THUMB_H / fh) - 1, math.ceil((y + h) * THUMB_H / fh) + 1
        keep[max(0, y0) : max(0, y1), max(0, x0) : max(0, x1)] = False
    if keep.mean() < MIN_UNMASKED:
        keep[:] = True
    return np.repeat(keep.reshape(-1), 3)


def _thumbs(data: bytes, count: int) -> np.ndarray:
    import numpy as np

    size = THUMB_W * THUMB_H * 3
    usable = min(count, len(data) // size)
    return np.frombuffer(data[: usable * size], dtype=np.uint8).reshape(usable, size)


def _fit(scale: str) -> str:
    """Scale and centre-crop to the thumbnail, as the render fits a clip to its frame."""
    return (
        f"{scale}scale={THUMB_W}:{THUMB_H}:force_original_aspect_ratio=increase:flags=area,"
        f"crop={THUMB_W}:{THUMB_H},setsar=1,format=rgb24"
    )


def thumbnails_by_frame(data: bytes, windows: Sequence[CutWindow]) -> dict[int, np.ndarray]:
    """Raw RGB thumbnails of the windows' frames, in order, by frame number (a short video
    gives fewer)."""
    wanted = window_frames(windows)
    frames = _thumbs(data, len(wanted))
    return {n: frames[i] for i, n in enumerate(wanted[: len(frames)])}


def _render_frames(path: str, windows: Sequence[CutWindow]) -> dict[int, np.ndarray]:
    """The windows' frames of the rendered file, decoded, as thumbnails, by frame number."""
    select = select_expression(windows).replace(",", "\\,")
    args = [*FFMPEG_BASE, "-loglevel", "error", "-i", path, "-an", "-vf",
            _fit(f"select='{select}',"), "-fps_mode", "passthrough", "-f", "rawvideo",
            "pipe:1"]  # fmt: skip
    last = windows[-1].last if windows else 0
    return thumbnails_by_frame(run_tool(args, timeout=60.0 + 0.2 * last).stdout, windows)


def _clip_frames(clip_paths: Sequence[str], counts: Sequence[int], fps: int) -> list[np.ndarray]:
    """Each clip's first `count` frames as the render shows them (looped at its frame rate,
    fitted to the frame), as thumbnails."""
    args: list[str] = [*FFMPEG_BASE, "-loglevel", "error"]
    for path in clip_paths:
        args += ["-stream_loop", "-1", "-i", path]
    chains = [
        f"[{i}:v]fps={fps},trim=end_frame={n},setpts=PTS-STARTPTS,{_fit('')}[c{i}]"
        for i, n in enumerate(counts)
    ]
    joined = "".join(f"[c{i}]" for i in range(len(counts)))
    graph = ";".join([*chains, f"{joined}concat=n={len(counts)}:v=1:a=0[out]"])
    args += ["-filter_complex", graph, "-map", "[out]", "-fps_mode", "passthrough",
             "-f", "rawvideo", "pipe:1"]  # fmt: skip
    done = run_tool(args, timeout=60.0 + 0.1 * sum(counts))
    frames = _thumbs(done.stdout, sum(counts))
    out, start = [], 0
    for n in counts:
        out.append(frames[start : start + n])
        start += n
    return out


def read_cuts(
    shown: Mapping[int, np.ndarray],
    windows: Sequence[CutWindow],
    clip_paths: Sequence[str],
    fps: int,
    boxes: Sequence[Mapping[str, Any]] = (),
    caption_frame: tuple[int, int] = (1080, 1920),
) -> list[CutReading]:
    """Where the video whose windows' frames are `shown` (thumbnails by frame number) cuts to
    each scene after the first (see the module docstring): one reading per window, in order.
    `clip_paths` are the scenes' clips in order, `boxes` the text boxes the render recorded
    (in caption_frame pixels)."""
    if len(clip_paths) != len(windows) + 1:
        raise ValueError(f"{len(clip_paths)} clips for {len(windows)} cuts")
    if not windows:
        return []
    # Scene j is shown from its start (at worst its window's first frame) to the next window's
    # last frame at most; the last scene only as far as its own window.
    starts = [0, *(w.first for w in windows)]
    ends = [w.last for w in windows] + [windows[-1].last]
    counts = [max(1, end - start + 1) for start, end in zip(starts, ends, strict=True)]
    with spent("probes"):
        clips = _clip_frames(clip_paths, counts, fps)
        keep = _mask(boxes, caption_frame)
        readings, start = [], 0  # scene 0 starts on frame 0
        for window in windows:
            reading, start = _read_cut(window, start, shown, clips, keep, fps)
            readings.append(reading)
    return readings


def measure_cuts(
    render_path: str,
    clip_paths: Sequence[str],
    expected_cuts_s: Sequence[float],
    duration_s: float,
    fps: int,
    boxes: Sequence[Mapping[str, Any]] = (),
    caption_frame: tuple[int, int] = (1080, 1920),
    search_s: float = SEARCH_S,
) -> list[CutReading]:
    """read_cuts of a rendered file: its windows around the expected cuts decoded."""
    windows = cut_windows(expected_cuts_s, duration_s, fps, search_s)
    if not windows:
        return []
    with spent("probes"):
        shown = _render_frames(render_path, windows)
    return read_cuts(shown, windows, clip_paths, fps, boxes, caption_frame)


def _read_cut(
    window: CutWindow,
    previous_start: int,
    shown: Mapping[int, np.ndarray],
    clips: Sequence[np.ndarray],
    keep: np.ndarray,
    fps: int,
) -> tuple[CutReading, int]:
    """One cut's reading, and the frame the next reading takes this scene to start on."""
    import numpy as np

    frames = [n for n in range(window.first, window.last + 1) if n in shown]
    expected_s = round(window.expected / fps, 4)
    before, after = clips[window.scene - 1], clips[window.scene]
    if len(frames) < 2 or not len(before) or not len(after):
        note = "the render has no frames there" if len(frames) < 2 else "a clip has no frames"
        return CutReading(window.scene, expected_s, None, 0.0, 0.0, 0.0, note), window.expected
    seen = np.stack([shown[n][keep] for n in frames]).astype(np.int16)
    # Frame f before the cut shows the previous clip at f - previous_start.
    before_at = np.stack(
        [before[min(len(before) - 1, max(0, n - previous_start))][keep] for n in frames]
    ).astype(np.int16)
    off_before = np.abs(seen - before_at).mean(axis=1)
    # From a cut on frame c, frame f shows the next clip's frame f - c.
    width = min(len(frames), len(after))
    off_after = np.abs(seen[:, None, :] - after[None, :width][:, :, keep]).mean(axis=2)
    costs = []
    for i in range(1, len(frames)):  # the cut on frames[i]
        head = float(off_before[:i].sum())
        tail_rows = np.arange(i, len(frames))
        columns = np.minimum(tail_rows - i, width - 1)
        costs.append(head + float(off_after[tail_rows, columns].sum()))
    best = int(np.argmin(costs))
    residual = costs[best] / len(frames)
    close = [i for i, c in enumerate(costs) if c <= costs[best] + AMBIGUITY * max(residual, 1.0)]
    cut = frames[best + 1]
    note = ""
    if residual > MAX_RESIDUAL:
        note = f"the frames there show neither scene's clip (mean difference {residual:.1f})"
        reading = CutReading(window.scene, expected_s, None, 0.0, 0.0, round(residual, 2), note)
        return reading, window.expected
    if best == 0 and window.first > 0:
        note = "at the start of the search: the cut may be earlier"
    elif best == len(costs) - 1:
        note = "at the end of the search: the cut may be later"
    reading = CutReading(
        window.scene,
        expected_s,
        round(cut / fps, 4),
        round(frames[min(close) + 1] / fps, 4),
        round(frames[max(close) + 1] / fps, 4),
        round(residual, 2),
        note,
    )
    return reading, cut


def cut_offset(reading: CutReading, words_s: float) -> float | None:
    """How far the cut found is from where the scene's words start: 0 when the words' start
    lies in the range of cuts the frames cannot tell apart; None when none was found."""
    if reading.found_s is None:
        return None
    if reading.low_s <= words_s <= reading.high_s:
        return 0.0
    return min(abs(reading.low_s - words_s), abs(reading.high_s - words_s))


def cut_problems(
    readings: Sequence[CutReading],
    words_cuts_s: Sequence[float],
    tolerance_s: float,
    first_words: Sequence[str] = (),
) -> list[str]:
    """Each scene whose clip the render starts more than tolerance_s from its first word (or
    whose start was not found), with the time its words start and the time found."""
    if len(readings) != len(words_cuts_s):
        return [f"the render has {len(readings) + 1} scenes, the words {len(words_cuts_s) + 1}"]
    problems = []
    for k, (reading, words_s) in enumerate(zip(readings, words_cuts_s, strict=True)):
        said = f" ({first_words[k]!r}...)" if k < len(first_words) and first_words[k] else ""
        off = cut_offset(reading, words_s)
        if off is None:
            problems.append(
                f"scene {reading.scene}{said}: its clip's start was not found near "
                f"{reading.expected_s:.2f}s ({reading.note}); its words start at {words_s:.2f}s"
            )
        elif off > tolerance_s:
            found = f"{reading.found_s:.2f}s"
            if reading.high_s - reading.low_s > 1e-6:
                found += f" (the frames fit {reading.low_s:.2f}-{reading.high_s:.2f}s)"
            if reading.note:
                found += f", {reading.note}"
            problems.append(
                f"scene {reading.scene}{said} starts at {found} in the render, its words at "
                f"{words_s:.2f}s: {off:.2f}s off (at most {tolerance_s:g}s)"
            )
    return problems
