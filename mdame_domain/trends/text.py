"""Feed text cleaning: the visible text of an HTML fragment, entities unescaped, whitespace
collapsed."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

_SKIPPED_HTML_TAGS = frozenset({"script", "style", "noscript", "template"})
_WHITESPACE = re.compile(r"\s+")


class _TextExtractor(HTMLParser):
    """Collects the visible text of an HTML fragment; tags become spaces so words do not fuse."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_HTML_TAGS:
            self._skip_depth += 1
        self.chunks.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_HTML_TAGS and self._skip_depth:
            self._skip_depth -= 1
        self.chunks.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.chunks.append(data)


def clean_html_text(text: str) -> str:
    """Strip tags, unescape entities (also double-escaped ones) and collapse whitespace."""
    if not text:
        return ""
    extractor = _TextExtractor()
    extractor.feed(text)
    extractor.close()
    # A second unescape catches feeds that escape their HTML twice ("&amp;amp;").
    visible = unescape("".join(extractor.chunks))
    return _WHITESPACE.sub(" ", visible).strip()
