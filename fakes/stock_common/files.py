"""The MP4 files the stock servers serve: real H.264 clips of a word, made once per word and
scaled to each size asked, cached in the process."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from fakes import imagery

# The tiny clip every rendition of a word is scaled from, and its length (the longest footage).
_BASE_SIZE, _BASE_SECONDS = 48, 12
_render_lock = threading.Lock()
_files: dict[tuple[str, int, int, int, int], bytes] = {}
_bases: dict[str, Path] = {}
_folder: list[Path] = []


def temporary(prefix: str) -> Path:
    """A temporary folder removed when the process exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _scratch() -> Path:
    if not _folder:
        _folder.append(temporary("mdame-fake-stock-"))
    return _folder[0]


def _base(word: str) -> Path:
    if word not in _bases:
        path = _scratch() / f"{word}.mp4"
        path.write_bytes(imagery.footage_mp4(word, _BASE_SIZE, _BASE_SIZE, _BASE_SECONDS))
        _bases[word] = path
    return _bases[word]


def footage_file(word: str, width: int, height: int, seconds: int, fps: int) -> bytes:
    """A real MP4 (H.264, yuv420p, faststart, no audio) of `word` at width x height, `fps`,
    `seconds` long: the word's tiny clip scaled (cached per process)."""
    key = (word, width, height, seconds, fps)
    with _render_lock:
        if key in _files:
            return _files[key]
        out = _scratch() / f"{word}-{width}x{height}-{fps}-{seconds}.mp4"
        done = subprocess.run(
            ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
             "-i", str(_base(word)), "-t", str(seconds),
             "-vf", f"scale={width}:{height}:flags=bicubic,setsar=1", "-r", str(fps),
             "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
             "-movflags", "+faststart", "-an", str(out)],
            capture_output=True,
            timeout=120,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"ffmpeg failed: {done.stderr.decode(errors='replace')[-500:]}")
        data = out.read_bytes()
        out.unlink()
        _files[key] = data
        return data


def file_size_estimate(width: int, height: int, seconds: int) -> int:
    """What an answer says a rendition weighs (Pixabay's `size`), before it is ever made."""
    return max(4096, width * height * seconds // 10)
