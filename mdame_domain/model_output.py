"""Checks of what a language model returned: nothing it says is trusted until it passes here.

Every function raises InvalidModelOutput naming what is wrong; the caller never publishes
output that failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mdame_domain.writer import MAX_SCRIPT_WORDS, MIN_SCRIPT_WORDS

HOOK_MIN_WORDS, HOOK_MAX_WORDS = 4, 20
# Spoken short-form pace: about 150 words a minute.
WORDS_PER_SECOND = 2.5
# Below this honesty a hook promises what the script does not keep: it scores nothing.
HONESTY_FLOOR = 0.5


class InvalidModelOutput(ValueError):
    """The model's answer broke its schema, its length, its language or its rubric."""


def target_words(target_seconds: int) -> int:
    """The spoken length of a script of `target_seconds`, within the 80-150 word bounds."""
    return max(MIN_SCRIPT_WORDS, min(MAX_SCRIPT_WORDS, round(target_seconds * WORDS_PER_SECOND)))


def word_count(text: str) -> int:
    return len(text.split())


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidModelOutput(f"field {name!r} must be a non-empty string, got {value!r:.80}")
    if "\x00" in value:
        raise InvalidModelOutput(f"field {name!r} contains a NUL character")
    return " ".join(value.split())


def _object(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidModelOutput(f"{what} must be a JSON object, got {type(data).__name__}")
    return data


# A few languages' commonest function words: enough to tell a script in the wrong language.
_STOPWORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in (
        ("en", "the and is are of to in that it for with this you on was what"),
        ("es", "el la los las de que y en es un una por con para del se"),
        ("fr", "le la les de des et est un une que en du pour dans qui pas"),
        ("de", "der die das und ist nicht ein eine zu den mit von sich auf"),
        ("pt", "o os as de que e em um uma para com do da não se"),
        ("it", "il lo la gli le di che e un una per con non del della"),
    )
}


def detected_language(text: str) -> str | None:
    """The language whose function words clearly dominate `text`, or None when it cannot tell
    (too short, a language not listed, or no clear winner)."""
    words = re.findall(r"[^\W\d_]+", text.lower())
    if len(words) < 20:
        return None
    hits = {lang: sum(1 for w in words if w in stop) for lang, stop in _STOPWORDS.items()}
    best = max(hits, key=lambda lang: hits[lang])
    ranked = sorted(hits.values(), reverse=True)
    if ranked[0] < 3 or ranked[0] < 2 * ranked[1]:
        return None
    return best


def check_language(text: str, language: str) -> None:
    """InvalidModelOutput when `text` is confidently in another language than `language`."""
    wanted = language.split("-")[0].lower()
    found = detected_language(text)
    if found is not None and wanted in _STOPWORDS and found != wanted:
        raise InvalidModelOutput(f"the script is in {found!r}, the dimension asks for {wanted!r}")


@dataclass(frozen=True)
class ScriptDraft:
    body: str
    call_to_action: str


def script_draft(data: Any, language: str) -> ScriptDraft:
    """The writer's answer: {"body", "call_to_action", "language"}."""
    data = _object(data, "the script")
    body, cta = _text(data, "body"), _text(data, "call_to_action")
    stated = data.get("language")
    if isinstance(stated, str) and stated.split("-")[0].lower() != language.split("-")[0].lower():
        raise InvalidModelOutput(f"the script says it is in {stated!r}, not {language!r}")
    check_language(f"{body} {cta}", language)
    return ScriptDraft(body=body, call_to_action=cta)


def check_script_length(text: str, target: int, tolerance: float = 0.25) -> int:
    """The word count of the full script; InvalidModelOutput outside 80-150 words or more than
    `tolerance` away from the target."""
    count = word_count(text)
    if not MIN_SCRIPT_WORDS <= count <= MAX_SCRIPT_WORDS:
        raise InvalidModelOutput(
            f"the script has {count} words; it must have {MIN_SCRIPT_WORDS}-{MAX_SCRIPT_WORDS}"
        )
    if abs(count - target) > target * tolerance:
        raise InvalidModelOutput(f"the script has {count} words, the target is {target}")
    return count


def hook_text(data: Any) -> str:
    """A hook candidate's answer: {"hook"}, one spoken line of 4-20 words."""
    hook = _text(_object(data, "the hook"), "hook")
    count = word_count(hook)
    if not HOOK_MIN_WORDS <= count <= HOOK_MAX_WORDS:
        raise InvalidModelOutput(
            f"the hook has {count} words; it must have {HOOK_MIN_WORDS}-{HOOK_MAX_WORDS}"
        )
    return hook


@dataclass(frozen=True)
class HookVerdict:
    index: int
    curiosity_gap: float
    specificity: float
    honesty: float
    reason: str

    @property
    def score(self) -> float:
        return rubric_score(self.curiosity_gap, self.specificity, self.honesty)


def rubric_score(curiosity_gap: float, specificity: float, honesty: float) -> float:
    """The mean of the three criteria; a hook below the honesty floor (it promises what the
    script does not keep) scores 0 whatever its other merits."""
    if honesty < HONESTY_FLOOR:
        return 0.0
    return round((curiosity_gap + specificity + honesty) / 3, 4)


def _unit(item: Mapping[str, Any], name: str) -> float:
    value = item.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidModelOutput(f"critic score {name!r} must be a number in [0, 1], got {value!r}")
    return float(value)


def critic_verdicts(data: Any, hooks: Sequence[str]) -> list[HookVerdict]:
    """The critic's answer: {"scores": [{"hook_index", "curiosity_gap", "specificity",
    "honesty", "reason"}]}, exactly one entry per hook."""
    items = _object(data, "the critique").get("scores")
    if not isinstance(items, list) or len(items) != len(hooks):
        raise InvalidModelOutput(f"the critic must score each of the {len(hooks)} hooks once")
    verdicts: dict[int, HookVerdict] = {}
    for item in items:
        item = _object(item, "a critic score")
        index = item.get("hook_index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(hooks):
            raise InvalidModelOutput(f"critic hook_index {index!r} is not a hook")
        if index in verdicts:
            raise InvalidModelOutput(f"the critic scored hook {index} twice")
        verdicts[index] = HookVerdict(
            index,
            _unit(item, "curiosity_gap"),
            _unit(item, "specificity"),
            _unit(item, "honesty"),
            _text(item, "reason")[:500],
        )
    return [verdicts[i] for i in range(len(hooks))]


@dataclass(frozen=True)
class SafetyVerdict:
    allowed: bool
    categories: tuple[str, ...]
    reason: str


def safety_verdict(data: Any) -> SafetyVerdict:
    """The classifier's answer: {"allowed": bool, "categories": [str], "reason": str}."""
    data = _object(data, "the safety verdict")
    allowed = data.get("allowed")
    if not isinstance(allowed, bool):
        raise InvalidModelOutput(f"'allowed' must be true or false, got {allowed!r}")
    categories = data.get("categories", [])
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise InvalidModelOutput("'categories' must be a list of strings")
    cleaned = tuple(" ".join(c.split())[:80] for c in categories if c.strip())
    return SafetyVerdict(allowed, cleaned[:10], _text(data, "reason")[:500])
