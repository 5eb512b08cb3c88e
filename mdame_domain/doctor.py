"""`mdame doctor`'s plain parts: the verdicts, the table, redaction
and the small rules the checks share. The checks themselves talk to the real client libraries
and live in mdame_cli/doctor/; nothing here imports a provider SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit, urlunsplit

# Re-exported: the checks and the providers' health checks import them from here.
from mdame_domain.redaction import Redactor as Redactor
from mdame_domain.redaction import display_url as display_url


class Status(StrEnum):
    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class Check:
    """One row of the table: what was checked, the verdict, and a one-line reason."""

    name: str
    status: Status
    detail: str

    @property
    def group(self) -> str:
        """The check's kind (`youtube:tech/@tech` belongs to `youtube`), for --only."""
        return self.name.split(":", 1)[0]


def exit_code(checks: Iterable[Check]) -> int:
    """1 when anything failed; warnings and skips do not stop a deployment."""
    return 1 if any(c.status is Status.FAIL for c in checks) else 0


def summary(checks: Sequence[Check]) -> str:
    counts = {s: sum(1 for c in checks if c.status is s) for s in Status}
    return ", ".join(f"{n} {s.value}" for s, n in counts.items())


def render_table(checks: Sequence[Check], width: int = 100) -> str:
    """A plain-text table: check, status, detail (details wrap under their own column)."""
    name_w = max([len("check"), *(len(c.name) for c in checks)])
    status_w = len("STATUS")
    detail_w = max(30, width - name_w - status_w - 4)
    lines = [f"{'check':<{name_w}}  {'status':<{status_w}}  detail", "-" * width]
    for c in checks:
        chunks = _wrap(c.detail, detail_w) or [""]
        lines.append(f"{c.name:<{name_w}}  {c.status.value:<{status_w}}  {chunks[0]}")
        lines.extend(f"{'':<{name_w}}  {'':<{status_w}}  {more}" for more in chunks[1:])
    lines.append("-" * width)
    lines.append(summary(checks))
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


# -- secrets -----------------------------------------------------------------------------------


def secret_values(environ: Mapping[str, str], names: Iterable[str]) -> list[str]:
    """The values of the named variables that are set (what the Redactor must never print)."""
    return [environ[n] for n in names if environ.get(n)]


def first_line(text: str, limit: int = 200) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


# -- Edge-TTS ----------------------------------------------------------------------------------

_EDGE_SYNTH_SUFFIX = "/edge/v1"


def edge_voice_list_url(wss_url: str) -> str:
    """The voices-list URL of the Edge-TTS service whose synthesis WebSocket is `wss_url`.

    edge-tts keeps them side by side: wss://HOST/consumer/speech/synthesize/readaloud/edge/v1
    ?TrustedClientToken=T and https://HOST/.../readaloud/voices/list?trustedclienttoken=T. The
    same relation points the client's list_voices at MDAME_EDGE_TTS_URL's server."""
    parts = urlsplit(wss_url)
    scheme = {"wss": "https", "ws": "http"}.get(parts.scheme)
    if scheme is None or not parts.path.endswith(_EDGE_SYNTH_SUFFIX):
        raise ValueError(
            f"expected a ws:// or wss:// URL ending in {_EDGE_SYNTH_SUFFIX}?..., got "
            f"{display_url(wss_url)!r}"
        )
    path = parts.path[: -len(_EDGE_SYNTH_SUFFIX)] + "/voices/list"
    token = ""
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if name.lower() == "trustedclienttoken":
            token = value
    return urlunsplit((scheme, parts.netloc, path, f"trustedclienttoken={token}", ""))


# -- the database ------------------------------------------------------------------------------


FUNCTION_FILES = "functions/"  # how the runner records a function file


def migration_problems(
    files: Sequence[tuple[str, str]],
    applied: Mapping[str, str],
    squashed: Mapping[str, str] | None = None,
) -> list[str]:
    """What stands between the database and the checkout's migrations, as the runner sees it:
    `files` are (name, sha256) on disk in order, versioned files then function files
    ("functions/<family>.sql", run again whenever they change), `applied` name -> recorded
    sha256, `squashed` the per-change files a baseline replaced (name -> sha256)."""
    squashed = squashed or {}
    on_disk = dict(files)
    problems = []
    edited = [
        n
        for n, sha in sorted(applied.items())
        if (n in on_disk and on_disk[n] != sha and not n.startswith(FUNCTION_FILES))
        or (n in squashed and squashed[n] != sha)
    ]
    if edited:
        problems.append(f"edited after it was applied: {', '.join(edited)}")
    unknown = sorted(n for n in applied if n not in on_disk and n not in squashed)
    if unknown:
        problems.append(
            f"applied but not in this checkout (code older than the database?): "
            f"{', '.join(unknown)}"
        )
    pending = [n for n, sha in files if applied.get(n) != sha and n not in edited]
    if pending:
        problems.append(f"{len(pending)} pending: {', '.join(pending)} (run `mdame db migrate`)")
    return problems


# -- disk --------------------------------------------------------------------------------------

GIB = 1024**3


def disk_verdict(free_bytes: int, min_free_bytes: int) -> Status:
    """FAIL under the threshold, WARN under twice it (a few days of renders), else OK."""
    if free_bytes < min_free_bytes:
        return Status.FAIL
    if free_bytes < 2 * min_free_bytes:
        return Status.WARN
    return Status.OK


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # unreachable; keeps mypy sure of a return
