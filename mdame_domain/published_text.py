"""Links, @handles, e-mail addresses and phone numbers kept out of what a video publishes.

Feed text and model output become the title (the hook), the description (the script), the
narration and the on-screen text. None of them may point viewers somewhere: a hostile feed or a
steered model would otherwise advertise a URL, an account or a number on the channel.

Rules, matched on an NFKC fold of the text (so full-width look-alikes count) and removed from
the original text:
- url: http://, https:// or ftp:// and anything up to the next space; www. the same way.
- email: name@domain.tld.
- domain: labels ending in a top-level domain of the Public Suffix List (ICANN's section, as
  the publicsuffixlist package ships it), in any case: example.com, SCAM.COM, promo.bet,
  bit.ly/x, news.example.co.uk/a. "Node.js", "Vue.js", "e.g.", "i.e.", "U.S.", "Ph.D.", "a.m.",
  "3.5", "1.2.3" and "report.pdf" are not domains (js, g, s, pdf are no top-level domains). A
  name that is one is stripped even when meant otherwise: "ASP.NET" is asp.net and "setup.py"
  a Paraguayan domain, both a viewer could visit. A sentence typed without the space after
  its full stop ("the end.It was") is not a domain when the word after the dot is a capitalised
  common word (It, So, You, Now, ...; not Com, Bet or Casino).
- handle: @ followed by letters, digits, '_' or '.', with at least one letter (@nasa, not
  "@ 5pm" or "@10:30").
- phone: digit groups with a leading '+' (8-15 digits), or at least 9 digits in groups split by
  single spaces, dashes or dots; thousands written with separators (1 000 000 000) and runs of
  years (1999 2000 2001) are numbers, not phones.
Hashtags (#science) are not contact details: YouTube uses them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from functools import cache

from publicsuffixlist import PublicSuffixList

from mdame_domain.writer import MIN_SCRIPT_WORDS, Script

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# Capitalised after a full stop with no space, these start a sentence ("the end.It was"), though
# each is a top-level domain too.
_SENTENCE_WORDS = frozenset({
    "it", "in", "to", "be", "so", "is", "at", "as", "no", "me", "us", "my", "do", "am", "by",
    "you", "now", "new", "one", "how", "here", "next",
})  # fmt: skip

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("url", re.compile(r"(?i)(?<![\w.])(?:(?:https?|ftp)://|www\.)[^\s<>\"]+")),
    (
        "email",
        re.compile(rf"(?<![\w.+-])[\w.+-]+@{_LABEL}(?:\.{_LABEL})+"),
    ),
    # A candidate: _domain says whether (or how much of) it is one.
    ("domain", re.compile(rf"(?<![\w@./-])(?:{_LABEL}\.)+{_LABEL}(?![\w-])(?:/[^\s<>\"]*)?")),
    ("handle", re.compile(r"(?<![\w@.])@(?=[A-Za-z0-9_.]*[A-Za-z])\w(?:[\w.]*\w)?")),
    (
        "phone",
        re.compile(
            r"(?<![\w.,+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,5}\)[ .-]?)?\d{1,5}(?:[ .-]\d{1,5}){0,6}"
            r"(?![\w]|[.,]\d)"
        ),
    ),
)
_TRAILING = ".,;:!?'\"»…"
# A connector left dangling by a removed detail: "Read more at example.com" -> "Read more".
_CONNECTOR = re.compile(r"(?i)(?:\b(?:at|on|via|visit|see)\b\s*[:\-]?\s*)$")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
# A sentence that lost a detail and kept fewer words than this said nothing but the detail.
MIN_LEFT_WORDS = 3
# A hook (the video's title) shorter than this after removal is refused, not published.
MIN_HOOK_WORDS = 4


@dataclass(frozen=True)
class ContactDetail:
    kind: str  # url, email, domain, handle or phone
    text: str  # as written in the original text
    start: int
    end: int


def _folded(text: str) -> tuple[str, list[int]]:
    """The NFKC fold of `text` and, per folded character, the index of its original one."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for folded in unicodedata.normalize("NFKC", char):
            chars.append(folded)
            origin.append(index)
    return "".join(chars), origin


def _is_phone(candidate: str) -> bool:
    digits = sum(ch.isdigit() for ch in candidate)
    if candidate.startswith("+"):
        return 8 <= digits <= 15
    if not 9 <= digits <= 15:
        return False
    groups = re.findall(r"\d+", candidate)
    if len(groups) < 2 and "(" not in candidate:
        return False  # one unbroken run of digits is a number
    separators = set(re.findall(r"[ .-]", candidate))
    if len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:]) and separators <= {" ", "."}:
        return False  # thousands: 1 000 000 000, 1.000.000.000
    return not all(len(g) == 4 and g[0] in "12" for g in groups)  # years: 1999 2000 2001


@cache
def _suffixes() -> PublicSuffixList:
    # ICANN's section only: a private suffix such as github.io is itself a site to visit.
    return PublicSuffixList(only_icann=True)


def _domain(candidate: str) -> str:
    """The domain (with its path) that `candidate` (dot-separated labels, a path perhaps)
    starts with, or "" when it names none: "scam.com.zz" is scam.com, "Node.js" nothing."""
    host, slash, path = candidate.partition("/")
    labels = host.split(".")
    for count in range(len(labels), 1, -1):
        last, before = labels[count - 1], labels[count - 2]
        glued_sentence = (
            last.lower() in _SENTENCE_WORDS
            and last[:1].isupper()
            and last[1:].islower()
            and before[-1:].islower()
        )
        name = ".".join(labels[:count])
        if not glued_sentence and _suffixes().privatesuffix(name.lower(), accept_unknown=False):
            return name + slash + path if count == len(labels) else name
    return ""


def _trim(match_text: str) -> str:
    trimmed = match_text.rstrip(_TRAILING)
    for close, open_ in ((")", "("), ("]", "[")):
        while trimmed.endswith(close) and trimmed.count(close) > trimmed.count(open_):
            trimmed = trimmed[:-1].rstrip(_TRAILING)
    return trimmed


def find_contact_details(text: str) -> tuple[ContactDetail, ...]:
    """Every link, e-mail address, handle and phone number in `text`, in text order."""
    folded, origin = _folded(text)
    found: list[tuple[int, int, str]] = []
    taken = [False] * len(folded)
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(folded):
            raw = _trim(match.group(0)) if kind in ("url", "domain") else match.group(0)
            start, end = match.start(), match.start() + len(raw)
            if not raw or any(taken[start:end]):
                continue
            if kind == "phone" and not _is_phone(raw):
                continue
            if kind == "domain":
                raw = _domain(raw)
                end = start + len(raw)
                if not raw:
                    continue
            found.append((start, end, kind))
            for i in range(start, end):
                taken[i] = True
    details = []
    for start, end, kind in sorted(found):
        first, last = origin[start], origin[end - 1] + 1
        details.append(ContactDetail(kind, text[first:last], first, last))
    return tuple(details)


def _tidy(text: str) -> str:
    text = re.sub(r"[(\[]\s*[)\]]", " ", text)  # brackets that held only the detail
    text = re.sub(r"\s+([.,;:!?)\]])", r"\1", text)
    text = re.sub(r"([(\[])\s+", r"\1", text)
    text = re.sub(r"([,;:])(?=[,;:.!?])", "", text)  # "call , or" -> "call, or"
    text = " ".join(text.split()).strip(" ,;:-")
    return text if any(ch.isalnum() for ch in text) else ""


def strip_contact_details(text: str) -> tuple[str, tuple[ContactDetail, ...]]:
    """`text` without its contact details (and a connector such as "at" or "visit" left
    dangling before one), tidied; and the details removed."""
    details = find_contact_details(text)
    if not details:
        return text, ()
    pieces: list[str] = []
    cursor = 0
    for detail in details:
        before = text[cursor : detail.start]
        pieces.append(_CONNECTOR.sub("", before))
        cursor = detail.end
    pieces.append(text[cursor:])
    return _tidy(" ".join(pieces)), details


def _words(text: str) -> int:
    return sum(1 for word in text.split() if any(ch.isalnum() for ch in word))


def strip_from_narration(text: str) -> tuple[str, tuple[ContactDetail, ...]]:
    """Narration without contact details: each sentence stripped, and a sentence that said
    little but the detail ("Read more at example.com.") dropped whole."""
    kept: list[str] = []
    removed: list[ContactDetail] = []
    for sentence in _SENTENCE_BREAK.split(text.strip()):
        cleaned, details = strip_contact_details(sentence)
        removed.extend(details)
        if details:
            if _words(cleaned) < MIN_LEFT_WORDS:
                continue
            if cleaned[-1] not in ".!?":
                cleaned += "."
        kept.append(cleaned)
    return " ".join(kept), tuple(removed)


@dataclass(frozen=True)
class PublishableScript:
    """The script without its contact details; `refused` says why it may not be published at
    all, `removed` which details were taken out of which field (kinds only: the audit trail
    need not carry a hostile link either)."""

    script: Script
    removed: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()

    @property
    def publishable(self) -> bool:
        return not self.refused


def _noted(where: str, details: tuple[ContactDetail, ...]) -> list[str]:
    if not details:
        return []
    kinds: dict[str, int] = {}
    for detail in details:
        kinds[detail.kind] = kinds.get(detail.kind, 0) + 1
    listed = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    return [f"removed {listed} from the {where}"]


def publishable_script(script: Script, min_words: int = MIN_SCRIPT_WORDS) -> PublishableScript:
    """Strip or refuse, per field:
    - narration (body sentences, the full text that becomes the description and the voice):
      strip, since a sentence stays true without the link it mentioned;
    - hook (the title and the first on-screen text): strip, but refuse a hook left with fewer
      than MIN_HOOK_WORDS words or that was mostly contact details: a title that was a link has
      nothing left to say;
    - call to action: strip, refuse when it was only the detail ("Follow @x");
    - the whole: refuse when the text falls under `min_words`, the length every script keeps.
    Hook candidates are stripped too: they are recorded next to the chosen hook."""
    notes: list[str] = []
    refused: list[str] = []

    hook, details = strip_contact_details(script.hook)
    notes += _noted("hook", details)
    removed_chars = sum(d.end - d.start for d in details)
    if details and (_words(hook) < MIN_HOOK_WORDS or removed_chars * 2 > len(script.hook.strip())):
        refused.append("the hook (the video's title) is mostly contact details")

    body: list[str] = []
    for sentence in script.body_sentences:
        kept, details = strip_from_narration(sentence)
        notes += _noted("body", details)
        if kept:
            body.append(kept)
    if script.body_sentences and not body:
        refused.append("the body is nothing but contact details")

    cta, details = strip_from_narration(script.call_to_action)
    notes += _noted("call to action", details)
    if details and _words(cta) < MIN_LEFT_WORDS:
        refused.append("the call to action is only contact details")

    text, details = strip_from_narration(script.text)
    notes += _noted("script text", details)
    count = len(text.split())
    if details and count < min_words:
        refused.append(
            f"without its contact details the script has {count} words; at least {min_words}"
        )

    if not notes:
        return PublishableScript(script)
    candidates = tuple(
        (hook if candidate == script.hook else strip_contact_details(candidate)[0], score)
        for candidate, score in script.hook_candidates
    )
    cleaned = replace(
        script,
        hook=hook,
        hook_candidates=candidates,
        body_sentences=tuple(body),
        call_to_action=cta,
        text=text,
        word_count=count,
    )
    return PublishableScript(cleaned, tuple(notes), tuple(refused))


def contact_detail_problem(text: str) -> str | None:
    """A sentence naming the first contact detail in `text`, or None: for operator settings
    that are published as they are (tags, hashtags, a call to action), refused, not stripped."""
    details = find_contact_details(text)
    if not details:
        return None
    first = details[0]
    return f"carries a {first.kind} ({first.text[:60]!r}); links, handles and contacts are refused"
