"""Credits for the stock footage a video shows, in the text it is published with.

What the sources ask (read in their guidelines and API documentation, 2026-12):
- Pexels: the license asks for no attribution, but the API guidelines ask apps to credit the
  creator where possible ("Photo by NAME on Pexels", linking the page). A Pexels credit is
  therefore kept whatever the platform's cap: only its link may give way.
- Pixabay: the content license asks for no attribution (its API asks to show where results come
  from when search results are displayed, which a published video is not). A Pixabay credit is a
  courtesy: the first thing to give way, leaving a one-line mention of the source.

The credits come from the scenes' results, in scene order (`source`: the footage's provenance,
mdame_domain/stock.py's StockCandidate.provenance()), each footage once. Author names come from
the sources' users, so they are published without contact details, angle brackets or line
breaks; a page link is published only when it is an https page of the source's own site.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mdame_domain.published_text import strip_contact_details
from mdame_domain.stock import PEXELS, PIXABAY, SOURCE_NAMES, SOURCES, attribution_line

# Sources whose guidelines ask for the creator's credit.
CREDIT_ASKED = frozenset({PEXELS})
SITES = {PEXELS: "pexels.com", PIXABAY: "pixabay.com"}
MAX_AUTHOR_CHARS = 80
MAX_URL_CHARS = 300
_UNSAFE = re.compile(r"[<>\s]")


def _author(raw: Any) -> str:
    name = " ".join(str(raw or "").replace("<", " ").replace(">", " ").split())
    name, _ = strip_contact_details(name)
    return name[:MAX_AUTHOR_CHARS].strip()


def _page_url(source: str, raw: Any) -> str:
    """The page link when it is an https page of the source's own site, else ""."""
    url = str(raw or "").strip()
    if not url or len(url) > MAX_URL_CHARS or _UNSAFE.search(url):
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host, site = (parts.hostname or "").lower(), SITES[source]
    if parts.scheme != "https" or not (host == site or host.endswith("." + site)):
        return ""
    return url


@dataclass(frozen=True)
class Credit:
    """One footage's credit: who made it, on which source, and its page there."""

    source: str
    author: str
    page_url: str
    id: str = ""

    @property
    def asked(self) -> bool:
        """Whether the source asks for this credit (else it is a courtesy)."""
        return self.source in CREDIT_ASKED

    def line(self, linked: bool = True) -> str:
        return attribution_line(self.source, self.author, self.page_url if linked else "")

    def to_json(self) -> dict[str, str]:
        return {
            "source": self.source,
            "id": self.id,
            "author": self.author,
            "page_url": self.page_url,
        }

    @classmethod
    def from_provenance(cls, record: Mapping[str, Any]) -> Credit | None:
        """From a clip's provenance (or a staged credit); None when it is not stock footage."""
        source = record.get("source")
        if source not in SOURCES:
            return None
        return cls(
            source=str(source),
            author=_author(record.get("author")),
            page_url=_page_url(str(source), record.get("page_url")),
            id=str(record.get("id") or "")[:100],
        )


def footage_credits(results: Iterable[Mapping[str, Any] | None]) -> tuple[Credit, ...]:
    """The credits of the scenes' results (in scene order): a result whose `source` is stock
    footage gives one; the same footage in several scenes is credited once, where it first
    shows. Results of other engines (generated, procedural, diffusion) give none."""
    credits: dict[tuple[str, ...], Credit] = {}
    for result in results:
        provenance = (result or {}).get("source")
        if not isinstance(provenance, Mapping):
            continue
        credit = Credit.from_provenance(provenance)
        if credit is None:
            continue
        key = (credit.source, credit.id) if credit.id else (credit.source, credit.line())
        credits.setdefault(key, credit)
    return tuple(credits.values())


def _mention(dropped: Sequence[Credit]) -> str:
    names = list(dict.fromkeys(SOURCE_NAMES[c.source] for c in dropped))
    return f"Also footage from {' and '.join(names)}." if names else ""


def _tiers(credits: Sequence[Credit]) -> tuple[list[str], list[str]]:
    """The credits blocks, fullest first: those that keep the asked-for credits' links, and
    those that drop them."""
    asked = [c for c in credits if c.asked]
    courtesy = [i for i, c in enumerate(credits) if not c.asked]
    linked = ["\n".join(c.line() for c in credits)]
    for keep in range(len(courtesy) - 1, -1, -1):
        shown = [c.line() for i, c in enumerate(credits) if c.asked or i in courtesy[:keep]]
        linked.append("\n".join([*shown, _mention([credits[i] for i in courtesy[keep:]])]))
    linked.append("\n".join(c.line() for c in asked))
    bare = [c.line(linked=False) for c in asked]
    mention = _mention([credits[i] for i in courtesy])
    unlinked = ["\n".join(filter(None, [*bare, mention])), "\n".join(bare)] if asked else []
    return list(dict.fromkeys(linked)), list(dict.fromkeys(unlinked))


def credit_blocks(credits: Sequence[Credit]) -> list[str]:
    """The credits block, fullest first, each next one shorter: every credit linked; the
    courtesy credits dropped from the last, a one-line mention of their source standing in;
    that mention dropped; then the asked-for credits without their links. The last is empty
    only when no credit is asked for."""
    linked, unlinked = _tiers(credits)
    return list(dict.fromkeys([*linked, *unlinked]))


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in (part.strip() for part in parts) if p)


def _cut_words(text: str, keep: int) -> str:
    words = text.split(" ")
    if keep >= len(words):
        return text
    return " ".join(words[:keep]).rstrip(" ,;:-.") + "…" if keep else ""


def with_credits(
    text: str, credits: Sequence[Credit], tail: str, fits: Callable[[str], bool]
) -> str:
    """`text`, the credits block, then `tail` (the hashtags), a blank line between each, such
    that `fits` holds when it can. What gives way, in order: the courtesy credits (as
    credit_blocks orders them), with `text` whole; then `text`, cut at a word (with an
    ellipsis), beside the asked-for credits with their links; then those links. Without an
    asked-for credit, `text` is never cut: it and `tail` are left for the caller's own limit,
    as without credits."""
    linked, unlinked = _tiers(credits)
    for block in linked:
        if fits(joined := _join(text, block, tail)):
            return joined
    if not any(c.asked for c in credits):
        return _join(text, tail)
    words = len(text.split(" "))
    for block in dict.fromkeys((linked[-1], *unlinked)):
        low, high = 0, words  # the most words of `text` that fit beside the block
        while low < high:
            middle = (low + high + 1) // 2
            if fits(_join(_cut_words(text, middle), block, tail)):
                low = middle
            else:
                high = middle - 1
        if low or fits(_join("", block, tail)):
            return _join(_cut_words(text, low), block, tail)
    return _join("", unlinked[-1], tail)
