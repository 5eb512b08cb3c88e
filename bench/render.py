"""Render cost next to the raw encode floor, and the probe pass as a fraction of the render.

Prepares, once: five procedural scene clips (360x640, as the offline visuals make them), an
espeak voice of about --seconds, its captions as the renders asset builds them
(mdame_domain.captions.build_captions over the voice's word timings, with the hook and the
--dimension file's caption style), the procedural music bed, and the floor's
inputs: the same scenes pre-scaled to 1080x1920 in one file and the voice at 48 kHz stereo.

Then, --repeats times and alternating which goes first:
- the floor: one ffmpeg encode of the pre-scaled video and the voice with the render's codec
  settings (encoder preset, -r, AAC 128k at 48 kHz, faststart) and no filters at all;
- the render: mdame_domain.render.render_media (pass 1: the audio-only loudness measurement;
  pass 2: the one encode with scaling, concat, captions, mix, ducking and loudnorm).
Wall time and CPU time (children's rusage: user + system) of each; medians and the ratios
render/floor are printed (target: at most 1.1x). Then the thumbnail's and the contact sheet's
cost, and the probe pass as a fraction of the render's wall time: the render gate's work on the
finished file, mdame_domain.probe.analyze_media (one ffprobe, and a decode of the sound: the
render measured its picture as it encoded) judged by
mdame_domain.render_quality.technical_problems (under rules_for the dimension's
duration_range_s), with the problems it finds; and the text_on_screen check's reading of the
frames (mdame_domain.captions.read_text_on_screen: a decode of the picture and numpy here, so
its CPU time counts this process's too).

    PYTHONPATH=. ENV=dev python bench/render.py [--seconds 30] [--repeats 3] [--dimension F]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mdame_domain.audio_mix import (  # noqa: E402
    AUDIO_BITRATE,
    AUDIO_SAMPLE_RATE,
    generate_procedural_bed,
    measure_mix,
)
from mdame_domain.captions import (  # noqa: E402
    CaptionBox,
    CaptionStyle,
    build_captions,
    fill_colour,
    read_text_on_screen,
    text_on_screen_problems,
)
from mdame_domain.contact_sheet import render_contact_sheet, sheet_scenes  # noqa: E402
from mdame_domain.dimensions import load_dimension_file  # noqa: E402
from mdame_domain.encoders import video_encoder  # noqa: E402
from mdame_domain.mediatools import FFMPEG_BASE, run_tool  # noqa: E402
from mdame_domain.probe import analyze_media  # noqa: E402
from mdame_domain.render import (  # noqa: E402
    RenderInput,
    RenderOutcome,
    output_seconds,
    render_media,
    scene_durations,
    scene_frame_counts,
)
from mdame_domain.render_quality import rules_for, technical_problems  # noqa: E402
from mdame_domain.scene_cuts import (  # noqa: E402
    cut_problems,
    cut_windows,
    measure_cuts,
    read_cuts,
    thumbnails_by_frame,
)
from mdame_domain.thumbnail import render_thumbnail  # noqa: E402
from mdame_domain.visuals import render_procedural_clip  # noqa: E402
from mdame_domain.voice import synthesize_espeak  # noqa: E402

TEXT = (
    "Glass rains sideways on a planet far from here. The wind there is faster than sound, "
    "and its deep blue colour hides a brutal place. Scientists found it by watching starlight "
    "pass through its air, and what they saw was silicate clouds. Some days the temperature "
    "tops a thousand degrees. Nobody will ever walk there, but we can still read its weather "
    "from sixty light years away. Follow for more strange facts about space."
)
PALETTE = ("#1e3a8a", "#b91c1c", "#0f766e")
HOOK = "Did you know glass rains sideways on a faraway planet?"
WEIGHTS = (1.0, 1.3, 0.8, 1.1, 1.0)
DIMENSION = Path(__file__).resolve().parent.parent / "dimensions" / "tech.yaml"


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_all() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime + _cpu_children()


MIN_SECONDS = 10.0


def _timed(
    action: Callable[[], object], cpu_now: Callable[[], float] = _cpu_children
) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), cpu_now()
    action()
    return time.perf_counter() - wall, cpu_now() - cpu


def _cuts(durations: list[float]) -> list[float]:
    return [sum(durations[: i + 1]) for i in range(len(durations) - 1)]


def _prepare(
    work: Path, seconds: float, style: CaptionStyle
) -> tuple[RenderInput, list[str], tuple[CaptionBox, ...]]:
    # espeak speaks about 2.6 words a second; the text repeats for long videos.
    words = (TEXT.split() * (1 + int(seconds) // 25))[: max(8, round(seconds * 2.6))]
    voice = synthesize_espeak(" ".join(words), "en-us", str(work / "voice.wav"))
    durations = scene_durations(list(WEIGHTS), voice.duration_s)
    clips = [
        render_procedural_clip(
            hashlib.sha256(f"bench-{i}".encode()).hexdigest(),
            PALETTE,
            d,
            str(work / f"clip{i}.mp4"),
        )
        for i, d in enumerate(durations)
    ]
    # As the renders asset does (_render_inputs): the karaoke captions of the word timings and
    # the hook (no scene titles: the title is the platform's).
    ass = work / "captions.ass"
    track = build_captions(voice.words, style, hook=HOOK)
    ass.write_text(track.ass, "utf-8")
    bed = generate_procedural_bed("bench", voice.duration_s, str(work / "bed.wav"))
    inp = RenderInput(
        clips,
        durations,
        voice.path,
        str(ass),
        str(work / "render.mp4"),
        music_path=bed.path,
        encoder=video_encoder(),
    )
    # As the renders asset does: the frames around each cut kept as thumbnails as they are
    # encoded, for the scene_timing reading.
    windows = cut_windows(_cuts(durations), output_seconds(inp), inp.fps)
    inp = dataclasses.replace(
        inp, thumb_ranges=[(w.first, w.last) for w in windows], thumbs_path=str(work / "cuts.rgb")
    )
    # The floor's inputs: the same scenes, already 1080x1920 at 24 fps, in one high-quality
    # file; the voice already at the output's rate and layout.
    counts = scene_frame_counts(durations, inp.fps)
    chains = [
        f"[{i}:v]fps={inp.fps},trim=end_frame={n},setpts=PTS-STARTPTS,"
        f"scale={inp.width}:{inp.height}:force_original_aspect_ratio=increase,"
        f"crop={inp.width}:{inp.height},setsar=1,format=yuv420p[v{i}]"
        for i, n in enumerate(counts)
    ]
    concat = "".join(f"[v{i}]" for i in range(len(counts))) + f"concat=n={len(counts)}[v]"
    prescaled = str(work / "prescaled.mp4")
    run_tool(
        [*FFMPEG_BASE, "-loglevel", "error"]
        + [a for c in clips for a in ("-stream_loop", "-1", "-i", c)]
        + ["-filter_complex", ";".join([*chains, concat]), "-map", "[v]",
           "-c:v", "libx264", "-preset", "veryfast", "-crf", "12", prescaled],
        timeout=1200,
    )  # fmt: skip
    voice48 = str(work / "voice48.wav")
    run_tool(
        [*FFMPEG_BASE, "-loglevel", "error", "-i", voice.path, "-ar", str(AUDIO_SAMPLE_RATE),
         "-ac", "2", voice48],
        timeout=120,
    )  # fmt: skip
    floor_args = [*FFMPEG_BASE, "-loglevel", "error", "-i", prescaled, "-i", voice48,
                  "-map", "0:v", "-map", "1:a"]  # fmt: skip
    for name, value in inp.encoder.options:
        floor_args += [f"-{name}", value]
    floor_args += [
        "-r", str(inp.fps), "-c:a", "aac", "-b:a", AUDIO_BITRATE,
        "-ar", str(AUDIO_SAMPLE_RATE), "-t", f"{output_seconds(inp):.6f}",
        "-movflags", "+faststart", str(work / "floor.mp4"),
    ]  # fmt: skip
    return inp, floor_args, track.boxes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the video")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--dimension",
        type=Path,
        default=DIMENSION,
        help="dimension file whose caption style and duration range apply",
    )
    args = parser.parse_args()
    # The voice must give every scene its 1.5 s (render.scene_durations); espeak runs short.
    if args.seconds < MIN_SECONDS or args.repeats < 1:
        parser.error(f"--seconds must be at least {MIN_SECONDS:g} ({len(WEIGHTS)} scenes of 1.5 s "
                     "and espeak's pace), --repeats at least 1")  # fmt: skip
    dimension = load_dimension_file(args.dimension)
    rules = rules_for(dimension.duration_range_s)
    with tempfile.TemporaryDirectory(prefix="mdame-bench-render-") as tmp:
        work = Path(tmp)
        inp, floor_args, boxes = _prepare(work, args.seconds, dimension.captions)
        print(
            f"video {output_seconds(inp):.1f}s {inp.width}x{inp.height}@{inp.fps}, "
            f"encoder {inp.encoder.name}, {os.cpu_count()} CPUs, {args.repeats} repeats"
        )
        floor: list[tuple[float, float]] = []
        render: list[tuple[float, float]] = []
        outcomes: list[RenderOutcome] = []
        for i in range(args.repeats):
            steps = [("floor", floor), ("render", render)]
            for name, results in steps if i % 2 == 0 else steps[::-1]:
                if name == "floor":
                    results.append(_timed(lambda: run_tool(floor_args, timeout=1200)))
                else:
                    results.append(_timed(lambda: outcomes.append(render_media(inp))))
                print(f"  round {i + 1} {name:6s} wall {results[-1][0]:6.2f}s cpu "
                      f"{results[-1][1]:6.2f}s")  # fmt: skip
        measure_wall, measure_cpu = _timed(
            lambda: measure_mix(
                inp.voice_wav, inp.music_path, output_seconds(inp), inp.music_volume_db
            )
        )
        thumb_wall, thumb_cpu = _timed(
            lambda: render_thumbnail(inp.out_path, "A bench title", str(work / "thumb.jpg"))
        )
        problems: list[str] = []

        def gate() -> None:
            # What the renders asset does with its stored file; the bench has no scene plan, so
            # the planned durations are the rendered ones.
            analysis = analyze_media(inp.out_path, outcomes[-1].picture)
            durations = inp.scene_durations_s
            found = technical_problems(analysis, rules, durations, durations)
            problems.extend(f"{name}: {p}" for name, ps in found.items() for p in ps)

        probe_wall, probe_cpu = _timed(gate)
        tiles = sheet_scenes(
            list(range(len(inp.scene_durations_s))), inp.scene_durations_s,
            [{}] * len(inp.scene_durations_s),
        )  # fmt: skip
        sheet_wall, sheet_cpu = _timed(
            lambda: render_contact_sheet(inp.clip_paths, tiles, str(work / "sheet.jpg"), work)
        )
        text_problems: list[str] = []

        def read_text() -> None:
            readings = read_text_on_screen(
                inp.out_path, boxes, inp.scene_durations_s, output_seconds(inp),
                inp.width, inp.height, inp.fps, fill=fill_colour(dimension.captions.primary),
            )  # fmt: skip
            text_problems.extend(text_on_screen_problems(readings))

        text_wall, text_cpu = _timed(read_text, _cpu_all)
        cut_findings: list[str] = []
        cuts = _cuts(list(inp.scene_durations_s))
        box_json = [b.to_json() for b in boxes]

        def read_scene_cuts() -> None:
            # What the renders asset does after the encode: the encoded frames' thumbnails
            # against the clips (the scene_timing check then reads the payload).
            windows = cut_windows(cuts, output_seconds(inp), inp.fps)
            shown = thumbnails_by_frame(Path(str(inp.thumbs_path)).read_bytes(), windows)
            readings = read_cuts(shown, windows, inp.clip_paths, inp.fps, box_json)
            cut_findings.extend(cut_problems(readings, cuts, 0.25))

        cuts_wall, cuts_cpu = _timed(read_scene_cuts, _cpu_all)
        decode_wall, decode_cpu = _timed(
            lambda: measure_cuts(inp.out_path, inp.clip_paths, cuts, output_seconds(inp),
                                 inp.fps, box_json),
            _cpu_all,
        )  # fmt: skip

        def med(values: list[tuple[float, float]], k: int) -> float:
            return statistics.median(v[k] for v in values)

        f_wall, f_cpu, r_wall, r_cpu = med(floor, 0), med(floor, 1), med(render, 0), med(render, 1)
        print(f"floor   median wall {f_wall:6.2f}s  cpu {f_cpu:6.2f}s")
        print(f"render  median wall {r_wall:6.2f}s  cpu {r_cpu:6.2f}s  (pass 1 alone: wall "
              f"{measure_wall:.2f}s, cpu {measure_cpu:.2f}s)")  # fmt: skip
        print(f"ratio render/floor: wall {r_wall / f_wall:.2f}x  cpu {r_cpu / f_cpu:.2f}x  "
              f"(target <= 1.10x)")  # fmt: skip
        print(f"thumbnail: wall {thumb_wall:.2f}s cpu {thumb_cpu:.2f}s "
              f"({thumb_wall / r_wall:.1%} of the render)")  # fmt: skip
        print(f"contact sheet: wall {sheet_wall:.2f}s cpu {sheet_cpu:.2f}s "
              f"({sheet_wall / r_wall:.1%} of the render)")  # fmt: skip
        print(f"probe pass (analyze_media + render_quality): wall {probe_wall:.2f}s "
              f"cpu {probe_cpu:.2f}s, "
              f"{probe_wall / r_wall:.1%} of the render's wall time; "
              f"problems: {problems or 'none'}")  # fmt: skip
        print(f"text_on_screen (frames read): wall {text_wall:.2f}s cpu {text_cpu:.2f}s, "
              f"{text_wall / r_wall:.1%} of the render's wall time; "
              f"problems: {text_problems or 'none'}")  # fmt: skip
        print(f"scene_timing (the cuts read from the encoded frames): wall {cuts_wall:.2f}s "
              f"cpu {cuts_cpu:.2f}s; problems: {cut_findings or 'none'}; of a file decoded "
              f"instead (other bytes): wall {decode_wall:.2f}s cpu {decode_cpu:.2f}s")  # fmt: skip


if __name__ == "__main__":
    main()
