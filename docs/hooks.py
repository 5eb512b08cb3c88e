"""mkdocs hook: the configuration page is written at build time from the settings model.

docs/ holds no configuration.md: `on_files` adds it, its Markdown being
`mdame_core.settings.reference_markdown()`, the same model the code reads its settings through.
So the page lists every variable the code knows, with its type, default and unit, and cannot
drift from it. A build whose settings model cannot give the page fails, saying why.
"""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

PAGE = "configuration.md"


def configuration_markdown() -> str:
    try:
        from mdame_core.settings import reference_markdown
    except ImportError as exc:
        raise PluginError(
            f"docs/hooks.py: {PAGE} is generated from mdame_core.settings.reference_markdown(), "
            f"which cannot be imported ({exc}); run `make docs` from the checkout's venv "
            "(make install)"
        ) from exc
    text = reference_markdown()
    if not text.strip():
        raise PluginError(f"docs/hooks.py: reference_markdown() gave an empty {PAGE}")
    return text


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    if files.get_file_from_path(PAGE) is not None:
        raise PluginError(
            f"docs/{PAGE} must not exist: the page is generated from the settings model"
        )
    files.append(File.generated(config, PAGE, content=configuration_markdown()))
    return files
