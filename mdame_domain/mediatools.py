"""Thin, typed wrapper around the external media tools (ffmpeg, ffprobe, espeak-ng).

Callers get one exception type with the tool name, a short summary of the arguments and the
tail of stderr, instead of a CalledProcessError whose message hides what went wrong.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

INSTALL_HINT = "apt-get install ffmpeg espeak-ng"

# Quiet, non-interactive ffmpeg: -nostdin stops ffmpeg from eating the parent's stdin.
FFMPEG_BASE: tuple[str, ...] = ("ffmpeg", "-hide_banner", "-nostdin", "-nostats", "-y")

_ARGS_SUMMARY_CHARS = 300
_STDERR_TAIL_CHARS = 1500


class MediaToolError(RuntimeError):
    """An external media tool failed, timed out or is missing."""

    def __init__(self, tool: str, args_summary: str, stderr_tail: str, reason: str = "failed"):
        self.tool = tool
        self.args_summary = args_summary
        self.stderr_tail = stderr_tail
        self.reason = reason
        super().__init__(f"{tool} {reason}: {args_summary}\n{stderr_tail}".rstrip())


class MissingToolError(MediaToolError):
    """One or more required executables are not on PATH."""

    def __init__(self, missing: Sequence[str]):
        self.missing = tuple(missing)
        names = ", ".join(self.missing)
        super().__init__(
            tool=names,
            args_summary=f"not found on PATH (install with: {INSTALL_HINT})",
            stderr_tail="",
            reason="missing",
        )


def summarize_args(args: Sequence[str], limit: int = _ARGS_SUMMARY_CHARS) -> str:
    """One line of the command, shortened: filtergraphs can run to kilobytes."""
    text = " ".join(args)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tail(data: bytes | str | None, limit: int = _STDERR_TAIL_CHARS) -> str:
    if not data:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text.strip()[-limit:]


def require_tools(*names: str) -> None:
    """Raise MissingToolError naming every tool in `names` that is not installed."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        raise MissingToolError(missing)


def run_tool(
    args: list[str], timeout: float, input_bytes: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run a media tool; return its completed process (stdout/stderr as bytes) on exit 0."""
    if not args:
        raise ValueError("run_tool needs a command")
    tool = args[0]
    try:
        completed = subprocess.run(
            args,
            input=input_bytes,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise MissingToolError([tool]) from exc
    except subprocess.TimeoutExpired as exc:
        raise MediaToolError(
            tool, summarize_args(args), _tail(exc.stderr), reason=f"timed out after {timeout:.0f}s"
        ) from exc
    if completed.returncode != 0:
        raise MediaToolError(
            tool,
            summarize_args(args),
            _tail(completed.stderr),
            reason=f"failed (exit {completed.returncode})",
        )
    return completed
