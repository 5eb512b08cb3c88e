"""The deterministic local script writer: the offline stand-in for an LLM.

It writes English only (other language codes get English text) and never invents facts: the body
is the topic title and its snippets, trimmed, plus neutral sentences about the dimension.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mdame_domain.idempotency import idempotency_key
from mdame_domain.trends import clean_html_text, keyword_pattern

MAX_ATTEMPTS = 3  # the first try and two retries, then the topic is rejected
HOOK_THRESHOLD = 0.72
MIN_SCRIPT_WORDS = 80
MAX_SCRIPT_WORDS = 150
MAX_SENTENCE_WORDS = 30
MIN_SENTENCE_WORDS = 4
MAX_SUBJECT_WORDS = 8
MAX_NOUN_WORDS = 4

# Function words that carry no topic; kept as text so the list stays readable.
_STOPWORD_TEXT = (
    "a an and are as at be but by do does for from has have how in into is it its of on or so "
    "that the their then this to was were what when where which who why will with"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class TopicBrief:
    title: str
    snippets: tuple[str, ...]
    keywords: tuple[str, ...]
    dimension_title: str
    language: str = "en"


@dataclass(frozen=True)
class Script:
    hook: str
    hook_score: float
    hook_candidates: tuple[tuple[str, float], ...]
    body_sentences: tuple[str, ...]
    call_to_action: str
    text: str
    word_count: int


# --- small text helpers ----------------------------------------------------------------------

_URL = re.compile(r"https?://\S+|www\.\S+")
# Feed footers: everything from "Read more" / "The post ... appeared first on" is site chrome.
_FOOTER = re.compile(r"\b(read more|continue reading|the post .+ appeared first on)\b.*$", re.I)
_ELLIPSIS = re.compile(r"\[\s*(…|\.\.\.)\s*\]|…")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[\"'\u201c(]?[A-Z0-9])")
# " - The Verge", " | BBC News": up to four capitalized words after a dash or bar.
_TRAILING_SOURCE = re.compile(r"\s+[-|\u2013\u2014]\s+(?:[A-Z0-9][\w.&']*\s*){1,4}$")
_CLAUSE_END = re.compile(r"[,;:\u2014]$")


def _words(text: str) -> list[str]:
    return text.split()


def _word_count(text: str) -> int:
    return len(text.split())


def _as_sentence(text: str) -> str:
    text = text.strip().rstrip(",;:-\u2013\u2014 ")
    if not text:
        return ""
    if text[-1] not in ".!?":
        text += "."
    # "iPhone" and "eBay" keep their spelling; ordinary lowercase starts are capitalized.
    if text[0].islower() and not (len(text) > 1 and text[1].isupper()):
        text = text[0].upper() + text[1:]
    return text


def _strip_trailing_stopwords(words: list[str]) -> list[str]:
    while words and words[-1].lower().strip(",;:") in STOPWORDS:
        words = words[:-1]
    return words


def _trim_sentence(sentence: str) -> str:
    """Shorten an over-long sentence at its last clause break, or else at a word limit."""
    words = _words(sentence)
    if len(words) <= MAX_SENTENCE_WORDS:
        return sentence
    head = words[:MAX_SENTENCE_WORDS]
    for cut in range(len(head) - 1, MIN_SENTENCE_WORDS * 2 - 1, -1):
        if _CLAUSE_END.search(head[cut]):
            return _as_sentence(" ".join(head[: cut + 1]))
    shortened = _strip_trailing_stopwords(words[:20])
    return _as_sentence(" ".join(shortened))


def _clean_title(title: str) -> str:
    cleaned = clean_html_text(title)
    # "Headline - Site Name" carries the site, not the story.
    without_site = _TRAILING_SOURCE.sub("", cleaned)
    return (without_site if _word_count(without_site) >= 2 else cleaned).strip()


def _normalized(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _too_similar(left: str, right: str) -> bool:
    left_words, right_words = set(_normalized(left).split()), set(_normalized(right).split())
    if not left_words or not right_words:
        return False
    return len(left_words & right_words) / len(left_words | right_words) >= 0.8


def snippet_sentences(snippets: Sequence[str]) -> list[str]:
    """Readable sentences from raw snippets: no HTML, URLs or 'read more', each trimmed."""
    sentences: list[str] = []
    for snippet in snippets:
        text = _ELLIPSIS.sub(" ", _FOOTER.sub(" ", _URL.sub(" ", clean_html_text(snippet))))
        text = " ".join(text.split())
        for piece in _SENTENCE_BREAK.split(text):
            sentence = _as_sentence(_trim_sentence(piece.strip()))
            if _word_count(sentence) >= MIN_SENTENCE_WORDS:
                sentences.append(sentence)
    return sentences


# --- hook context ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _HookContext:
    subject: str  # the headline as a clause, at most 8 words
    noun: str  # what the topic is about: a matched keyword, or the dimension as a fallback
    dimension: str  # lowercased for mid-sentence use; "" when the brief names none


_PHRASE_BREAK_TEXT = (
    "about across after amid and around as at but by for from in into near of on over than "
    "through to while with"
)
_PHRASE_BREAK_WORDS = frozenset(_PHRASE_BREAK_TEXT.split())


def _subject(title: str) -> str:
    """The headline as a short clause: "Bees use tiny head movements to recognize..." -> "Bees use
    tiny head movements", cut before a preposition or conjunction rather than mid-phrase."""
    # Before a colon is usually the story ("Mars rover: what we learned" -> "Mars rover").
    head = title.split(":", 1)[0].strip() if ":" in title else title
    if _word_count(head) < 2:
        head = title
    words = _words(head)
    if len(words) > MAX_SUBJECT_WORDS:
        breaks = [
            cut
            for cut in range(3, MAX_SUBJECT_WORDS + 1)
            if words[cut].lower().strip(",;") in _PHRASE_BREAK_WORDS
        ]
        cut = breaks[-1] if breaks else MAX_SUBJECT_WORDS
        words = _strip_trailing_stopwords(words[:cut]) or words[:1]
    return " ".join(words).rstrip(".!?,;:")


def effective_keywords(brief: TopicBrief) -> tuple[str, ...]:
    """The brief's keywords, or the title's content words when the brief names none."""
    given = tuple(keyword.strip() for keyword in brief.keywords if keyword.strip())
    if given:
        return given
    title_words = _normalized(_clean_title(brief.title)).split()
    content = [word for word in title_words if len(word) >= 4 and word not in STOPWORDS]
    return tuple(dict.fromkeys(content or title_words))[:3]


def _lower_unless_acronym(word: str) -> str:
    # "Home Cooking" reads as "home cooking" mid-sentence; "AI" stays "AI".
    return word if word.isupper() and len(word) > 1 else word.lower()


def _noun_spelling(keyword: str, surface: str) -> str:
    # The source's spelling ("NASA", "iPhone"), unless it is only capitalized by position.
    return keyword if surface == keyword.capitalize() else surface


def _topic_noun(brief: TopicBrief, title: str, dimension: str) -> str:
    haystacks = (title, " ".join(brief.snippets))
    for keyword in effective_keywords(brief):
        pattern = keyword_pattern(keyword)
        for haystack in haystacks:
            found = pattern.search(haystack)
            if found:
                return " ".join(_noun_spelling(keyword, found.group(0)).split()[:MAX_NOUN_WORDS])
    return dimension or "this story"


def _hook_context(brief: TopicBrief) -> _HookContext:
    title = _clean_title(brief.title)
    if not title:
        raise ValueError("topic brief has an empty title")
    dimension_words = _words(clean_html_text(brief.dimension_title))[:MAX_NOUN_WORDS]
    dimension = " ".join(_lower_unless_acronym(word) for word in dimension_words)
    return _HookContext(
        subject=_subject(title),
        noun=_topic_noun(brief, title, dimension),
        dimension=dimension,
    )


def _field(ctx: _HookContext) -> str:
    return ctx.dimension or "this field"


# --- hook templates --------------------------------------------------------------------------

_HookTemplate = Callable[[_HookContext], str]


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _did_you_catch(ctx: _HookContext) -> str:
    return f"Did you catch this? {_capitalize(ctx.subject)}."


def _what_it_means_for_you(ctx: _HookContext) -> str:
    return f"{_capitalize(ctx.subject)}. What does that mean for you?"


def _bold_claim(ctx: _HookContext) -> str:
    return f"{_capitalize(ctx.subject)} changes everything."


def _why_everyone_talks(ctx: _HookContext) -> str:
    return f"Why is everyone suddenly talking about {ctx.noun}?"


def _real_story(ctx: _HookContext) -> str:
    return f"Nobody is telling you the real story behind {ctx.noun}."


def _if_you_follow(ctx: _HookContext) -> str:
    return f"If you follow {_field(ctx)}, this {ctx.noun} update is worth a minute."


def _in_sixty_seconds(ctx: _HookContext) -> str:
    return f"Here is what you should know about {ctx.noun} in 60 seconds."


def _more_interesting(ctx: _HookContext) -> str:
    return f"{_capitalize(ctx.noun)} just got a lot more interesting."


def _shocking(ctx: _HookContext) -> str:
    return f"Shocking news about {ctx.noun} you won't believe!"


# Each attempt draws a different set, so a retry offers genuinely different candidates.
HOOK_TEMPLATE_SETS: tuple[tuple[_HookTemplate, ...], ...] = (
    (_what_it_means_for_you, _did_you_catch, _bold_claim),  # headline-led
    (_real_story, _why_everyone_talks, _if_you_follow),  # curiosity, topic-led
    (_in_sixty_seconds, _more_interesting, _shocking),  # number / stat, bold
)


def hook_candidates(brief: TopicBrief, attempt: int) -> list[str]:
    """Exactly three distinct hooks; attempt 0, 1, 2 use different template sets (then cycle)."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    ctx = _hook_context(brief)
    templates = HOOK_TEMPLATE_SETS[attempt % len(HOOK_TEMPLATE_SETS)]
    hooks = [" ".join(template(ctx).split()) for template in templates]
    if len(set(hooks)) != len(hooks):  # cannot happen with distinct templates; guard anyway
        raise ValueError(f"hook templates collided for {brief.title!r}")
    return hooks


# --- hook scoring ----------------------------------------------------------------------------

_CLICKBAIT = (
    "shocking",
    "won't believe",
    "wont believe",
    "insane",
    "mind-blowing",
    "mind blowing",
    "jaw-dropping",
    "unbelievable",
    "gone wrong",
    "must see",
    "must-see",
    "stop scrolling",
)
_CURIOSITY = re.compile(
    r"\?|\b(why|how|secret|nobody|hidden|real story|what happens|here is why)\b", re.IGNORECASE
)
_DIRECT_ADDRESS = re.compile(r"\b(you|your|you're|yours)\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d")
_SHOUTED_WORD = re.compile(r"\b[A-Z]{4,}\b")


def _source_acronyms(brief: TopicBrief) -> set[str]:
    # All-caps words the source itself uses ("NASA", "HDMI") are names, not shouting.
    source = " ".join((brief.title, *brief.snippets, *brief.keywords, brief.dimension_title))
    return set(_SHOUTED_WORD.findall(source))


def score_hook(hook: str, brief: TopicBrief) -> float:
    """Score a hook in [0, 1]; a hook needs the topic plus two engagement cues to pass 0.72.

    +0.30 length in the 6-14 word sweet spot (+0.15 within two words of it)
    +0.25 mentions a topic keyword (the brief's keywords, or the title's content words)
    +0.15 addresses the viewer directly ("you", "your")
    +0.15 opens a curiosity gap (a question mark, "why", "how", "nobody", "the real story"...)
    +0.15 contains a concrete number
    -0.25 per clickbait-only phrase ("shocking", "won't believe"...), at most -0.50
    -0.20 for shouting: an all-caps word of 4+ letters that is not in the title (acronyms are)
    """
    words = _word_count(hook)
    score = 0.0
    if 6 <= words <= 14:
        score += 0.30
    elif 4 <= words <= 16:
        score += 0.15
    if any(keyword_pattern(k).search(hook) for k in effective_keywords(brief)):
        score += 0.25
    if _DIRECT_ADDRESS.search(hook):
        score += 0.15
    if _CURIOSITY.search(hook):
        score += 0.15
    if _NUMBER.search(hook):
        score += 0.15
    lowered = hook.lower()
    clickbait_hits = sum(1 for phrase in _CLICKBAIT if phrase in lowered)
    score -= min(0.50, 0.25 * clickbait_hits)
    if set(_SHOUTED_WORD.findall(hook)) - _source_acronyms(brief):
        score -= 0.20
    return round(min(1.0, max(0.0, score)), 4)


# --- body, padding and call to action --------------------------------------------------------


def _padding_sentences(ctx: _HookContext) -> list[str]:
    return [
        f"It is one of the stories shaping {_field(ctx)} right now.",
        f"Stories like this show how quickly {_field(ctx)} keeps changing.",
        "The full picture will become clearer over the coming weeks.",
        "For now, the basics are worth knowing before everyone else catches up.",
        f"Keep an eye on how {ctx.noun} develops from here.",
        "Small changes like this often add up to bigger shifts over time.",
        "Some of the details may still change as more information comes out.",
        "That is why it is worth a closer look, even if you only follow the headlines.",
    ]


def _call_to_action(ctx: _HookContext) -> str:
    stories = f"{ctx.dimension} stories" if ctx.dimension else "stories"
    return f"Follow for more {stories} like this, and tell us in the comments what you think."


def _lead_sentence(title: str) -> str:
    return _as_sentence(_trim_sentence(title))


def _pick_padding(ctx: _HookContext, title: str) -> list[str]:
    # Rotation seeded by the title: varied across topics, identical for the same topic.
    pads = _padding_sentences(ctx)
    start = int(idempotency_key("padding", title), 16) % len(pads)
    return pads[start:] + pads[:start]


def _compose_body(
    brief: TopicBrief, ctx: _HookContext, hook: str, call_to_action: str
) -> list[str]:
    title = _clean_title(brief.title)
    # A headline-led hook already said the headline; repeating it at once reads as a stutter.
    lead = [] if _normalized(ctx.subject) in _normalized(hook) else [_lead_sentence(title)]
    body: list[str] = []
    total = _word_count(hook) + _word_count(call_to_action)
    for sentence in [*lead, *snippet_sentences(brief.snippets)]:
        if any(_too_similar(sentence, kept) for kept in body):
            continue
        length = _word_count(sentence)
        if total + length <= MAX_SCRIPT_WORDS:
            body.append(sentence)
            total += length
    for pad in _pick_padding(ctx, title):
        if total >= MIN_SCRIPT_WORDS:
            break
        body.append(pad)
        total += _word_count(pad)
    if not MIN_SCRIPT_WORDS <= total <= MAX_SCRIPT_WORDS:
        raise ValueError(f"cannot fit a script for {brief.title!r} into 80-150 words ({total})")
    return body


def _pick_best(candidates: tuple[tuple[str, float], ...], title: str) -> tuple[str, float]:
    # Equal scores are broken by a title-seeded rotation, so videos do not all open the same way.
    offset = int(idempotency_key("hook", title), 16) % len(candidates)
    rotated = candidates[offset:] + candidates[:offset]
    return max(rotated, key=lambda pair: pair[1])


def write_script(
    brief: TopicBrief, attempt: int, threshold: float = HOOK_THRESHOLD
) -> Script | None:
    """Write a 80-150 word script, or None when the best hook scores below `threshold`.

    The caller retries with attempt + 1 and rejects the topic after MAX_ATTEMPTS attempts.
    """
    ctx = _hook_context(brief)
    candidates = tuple((hook, score_hook(hook, brief)) for hook in hook_candidates(brief, attempt))
    best_hook, best_score = _pick_best(candidates, brief.title)
    if best_score < threshold:
        return None
    call_to_action = _call_to_action(ctx)
    body = _compose_body(brief, ctx, best_hook, call_to_action)
    text = " ".join([best_hook, *body, call_to_action])
    return Script(
        hook=best_hook,
        hook_score=best_score,
        hook_candidates=candidates,
        body_sentences=tuple(body),
        call_to_action=call_to_action,
        text=text,
        word_count=_word_count(text),
    )
