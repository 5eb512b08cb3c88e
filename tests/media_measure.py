"""Measurements of rendered media for tests: ffmpeg's own meters, read from its output."""

from __future__ import annotations

import math
import re
import subprocess
from array import array

_SUMMARY_I = re.compile(r"Integrated loudness:\s*\n\s*I:\s*(-?[\d.]+|-inf) LUFS")
_SUMMARY_PEAK = re.compile(r"True peak:\s*\n\s*Peak:\s*(-?[\d.]+|-inf) dBFS")


def ebur128_summary(path: str) -> tuple[float, float]:
    """(integrated LUFS, true peak dBTP) of the first audio stream, by ebur128 peak=true."""
    stderr = subprocess.run(
        ["ffmpeg", "-hide_banner", "-nostdin", "-nostats", "-i", path, "-map", "0:a:0",
         "-af", "ebur128=peak=true:framelog=verbose", "-f", "null", "-"],
        capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    summary = stderr[stderr.rindex("Summary:") :]
    integrated, peak = _SUMMARY_I.search(summary), _SUMMARY_PEAK.search(summary)
    assert integrated and peak, summary
    return float(integrated.group(1)), float(peak.group(1))


def mono_samples(path: str, rate: int = 8000) -> array:
    """The audio as mono 32-bit floats at `rate` (low: enough for levels, fast in Python)."""
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-nostdin", "-i", path, "-ac", "1", "-ar", str(rate),
         "-f", "f32le", "pipe:1"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    samples = array("f")
    samples.frombytes(raw)
    return samples


def rms_db(samples: array, start_s: float, end_s: float, rate: int = 8000) -> float:
    """RMS level in dBFS of samples[start_s:end_s]."""
    part = samples[int(start_s * rate) : int(end_s * rate)]
    assert len(part) > 0, (start_s, end_s, len(samples))
    mean_square = math.fsum(x * x for x in part) / len(part)
    return 10 * math.log10(mean_square) if mean_square > 0 else -math.inf
