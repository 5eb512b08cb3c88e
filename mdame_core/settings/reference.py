"""The configuration page of the docs, generated from the declared settings (model.py)."""

from __future__ import annotations

from mdame_core.settings.model import GROUPS
from mdame_core.settings.reader import allowed, is_secret, shown_default

INTRO = """# Configuration

Every environment variable MD-AME reads, generated from its settings model
(`mdame_core/settings/model.py`), where each is declared once with its type, default, unit and
description. `mdame config` prints the values in effect and where each came from, secrets
masked. A bad value fails at start-up, naming the variable, its value and what it takes.

Secrets (marked 🔒) are read only from the environment; production resources read them as
`dg.EnvVar`, so Dagster never stores their values.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_markdown() -> str:
    parts = [INTRO]
    for group in GROUPS:
        title = (group.__doc__ or group.__name__).strip().splitlines()[0]
        parts.append(f"\n## {title}\n")
        parts.append("| Variable | Default | Takes | Description |")
        parts.append("|---|---|---|---|")
        for name, field in group.model_fields.items():
            if name not in group.__annotations__:
                continue
            lock = " 🔒" if is_secret(name) else ""
            parts.append(
                f"| `{name}`{lock} | {_cell(shown_default(name))} | {_cell(allowed(name))} "
                f"| {_cell(field.description or '')} |"
            )
    return "\n".join(parts) + "\n"
