"""Rule-based safety classifier (the offline stand-in for a model) and a small prompt firewall."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

CLASSIFIER_NAME = "rules-v1"


@dataclass(frozen=True)
class SafetyProfile:
    name: str
    blocked_terms: tuple[str, ...]
    caution_terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class SafetyDecision:
    verdict: Literal["allow", "block"]
    rule: str
    reasons: tuple[str, ...]
    classifier: str = CLASSIFIER_NAME


# Clearly unsafe for any audience: blocked by every profile.
_CLEARLY_UNSAFE = (
    "child abuse",
    "child sexual abuse",
    "child porn",
    "pornography",
    "porn",
    "bomb making",
    "make a bomb",
    "build a bomb",
    "how to kill",
    "kill yourself",
    "suicide method",
    "self-harm",
    "mass shooting",
    "terrorist attack",
    "beheading",
    "ethnic cleansing",
    "white supremacy",
    "white power",
    "hate speech",
    "racial slur",
    "nazi propaganda",
)

_VIOLENCE_AND_GORE = (
    "violence",
    "violent",
    "murder",
    "kill",
    "gore",
    "gory",
    "bloody",
    "bloodshed",
    "stabbing",
    "shooting",
    "massacre",
    "torture",
    "assault",
)
_WEAPONS = (
    "gun",
    "firearm",
    "rifle",
    "pistol",
    "shotgun",
    "ammunition",
    "grenade",
    "explosive",
    "bomb",
)
_GAMBLING = (
    "gambling",
    "gamble",
    "casino",
    "betting",
    "sportsbook",
    "wager",
    "poker",
    "slot machine",
    "jackpot",
)
_DRUGS = (
    "illegal drug",
    "cocaine",
    "heroin",
    "meth",
    "methamphetamine",
    "fentanyl",
    "marijuana",
    "cannabis",
    "overdose",
    "drug dealer",
)
_SEXUAL_CONTENT = (
    "sex",
    "sexual",
    "sexy",
    "nude",
    "nudity",
    "erotic",
    "explicit content",
    "onlyfans",
)
_SELF_HARM = ("suicide", "suicidal", "eating disorder")
_HATE = ("racist", "racism", "nazi", "supremacist", "bigot", "slur")

# Strict adds adult-but-legal themes that a children's channel would still avoid.
_STRICT_EXTRA = (
    "alcohol",
    "beer",
    "wine",
    "vodka",
    "whiskey",
    "cocktail",
    "drunk",
    "cigarette",
    "tobacco",
    "vape",
    "vaping",
    "horror",
    "death",
    "dead",
    "crime",
    "war",
    "dating",
)

_GENERAL_CAUTION = _GAMBLING + _WEAPONS + ("alcohol", "drug", "crime", "war")
_FAMILY_CAUTION = ("alcohol", "wine", "beer", "crime", "war", "death")

PROFILES: dict[str, SafetyProfile] = {
    "general": SafetyProfile(
        name="general", blocked_terms=_CLEARLY_UNSAFE, caution_terms=_GENERAL_CAUTION
    ),
    "family": SafetyProfile(
        name="family",
        blocked_terms=_CLEARLY_UNSAFE
        + _VIOLENCE_AND_GORE
        + _WEAPONS
        + _GAMBLING
        + _DRUGS
        + _SEXUAL_CONTENT
        + _SELF_HARM
        + _HATE,
        caution_terms=_FAMILY_CAUTION,
    ),
    "strict": SafetyProfile(
        name="strict",
        blocked_terms=_CLEARLY_UNSAFE
        + _VIOLENCE_AND_GORE
        + _WEAPONS
        + _GAMBLING
        + _DRUGS
        + _SEXUAL_CONTENT
        + _SELF_HARM
        + _HATE
        + _STRICT_EXTRA
        + ("drug",),
    ),
}


def _unique_terms(terms: Sequence[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for term in terms:
        cleaned = " ".join(term.lower().split())
        if cleaned:
            seen.setdefault(cleaned, None)
    return tuple(seen)


def profile_for(name: str, extra_blocked: Sequence[str] = ()) -> SafetyProfile:
    """Return a built-in profile by name, with a dimension's extra blocked terms appended."""
    key = name.strip().lower()
    if key not in PROFILES:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown safety profile {name!r} (known: {known})")
    base = PROFILES[key]
    if not extra_blocked:
        return base
    return SafetyProfile(
        name=base.name,
        blocked_terms=_unique_terms((*base.blocked_terms, *extra_blocked)),
        caution_terms=base.caution_terms,
    )


# Phrases that try to steer a downstream LLM; a trend item has no business containing them.
# Feeds come in many languages, so the common phrasings are listed per language. The text is
# folded first (see _firewall_fold): patterns are written without Latin accents, and 'ß' as
# 'ss'; Cyrillic and CJK keep their own letters.
_PROMPT_INJECTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.IGNORECASE))
    for label, pattern in (
        (
            "ignore previous instructions",
            r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+)?"
            r"(previous|prior|above|earlier|preceding)\s+(instructions|prompts?|rules|messages)",
        ),
        ("system prompt", r"\bsystem[\s-]*prompts?\b"),
        ("reveal instructions", r"\breveal\s+(your|the)\s+(instructions|prompt|rules)\b"),
        ("new instructions", r"\bnew\s+instructions\s*:"),
        ("developer mode", r"\b(developer|dan|god)\s+mode\b"),
        ("jailbreak the model", r"\bjailbreak\s+(the|this|your)\s+(model|ai|assistant|llm)\b"),
        ("role override", r"\byou\s+are\s+now\s+(an?\s+)?(unfiltered|uncensored|unrestricted)\b"),
        ("chat template token", r"<\|im_(start|end)\|>|\[/?INST\]|</?system>"),
        # Spanish
        (
            "ignore previous instructions (es)",
            r"\b(ignora|ignore|ignoren|ignorar|olvida|olvide|olviden|olvidar|omite|descarta|"
            r"desestima)\s+(todas\s+|todos\s+)?(las\s+|los\s+|tus\s+|sus\s+)?"
            r"(instrucciones|indicaciones|reglas|ordenes|normas|mensajes)\s+"
            r"(anteriores|previas|precedentes|de\s+arriba)\b",
        ),
        ("ignore the above (es)", r"\b(ignora|ignore|olvida|olvide)\s+(todo\s+)?lo\s+anterior\b"),
        ("system prompt (es)", r"\bprompt\s+del?\s+sistema\b"),
        ("new instructions (es)", r"\bnuevas\s+instrucciones\s*:"),
        # French
        (
            "ignore previous instructions (fr)",
            r"\b(ignore|ignorez|ignorer|oublie|oubliez|oublier)\s+(toutes\s+|tous\s+)?"
            r"(les\s+|tes\s+|vos\s+)?(instructions|consignes|regles|directives|messages)\s+"
            r"(precedentes|anterieures|ci-dessus|d'avant)\b",
        ),
        ("ignore the above (fr)", r"\b(ignore|ignorez|oublie|oubliez)\s+tout\s+ce\s+qui\s+precede"),
        ("system prompt (fr)", r"\bprompt\s+(du\s+)?systeme\b"),
        ("new instructions (fr)", r"\bnouvelles\s+(instructions|consignes)\s*:"),
        # German
        (
            "ignore previous instructions (de)",
            r"\b(ignoriere|ignorier|ignorieren|vergiss|vergessen|missachte|missachten)\s+"
            r"(sie\s+)?(alle\s+)?(die\s+|deine\s+|ihre\s+)?(vorherigen|vorigen|bisherigen|"
            r"obigen|fruheren|vorangegangenen|vorhergehenden)\s+"
            r"(anweisungen|instruktionen|regeln|befehle|vorgaben|nachrichten)\b",
        ),
        ("new instructions (de)", r"\bneue\s+(anweisungen|instruktionen)\s*:"),
        # Portuguese
        (
            "ignore previous instructions (pt)",
            r"\b(ignore|ignora|ignorar|ignorem|esqueca|esquece|esquecer|desconsidere|"
            r"desconsidera)\s+(todas\s+|todos\s+)?(as\s+|os\s+|suas\s+|tuas\s+)?"
            r"(instrucoes|regras|ordens|mensagens|orientacoes)\s+(anteriores|previas|acima)\b",
        ),
        ("system prompt (pt)", r"\bprompt\s+do\s+sistema\b"),
        ("new instructions (pt)", r"\bnovas\s+instrucoes\s*:"),
        # Italian
        (
            "ignore previous instructions (it)",
            r"\b(ignora|ignorate|dimentica|dimenticate)\s+(tutte\s+)?(le\s+)?"
            r"(istruzioni|regole|indicazioni)\s+(precedenti|sopra)\b",
        ),
        # Russian
        (
            "ignore previous instructions (ru)",
            r"(?<!\w)(игнорируй|игнорируйте|игнорировать|проигнорируй|проигнорируйте|забудь|"
            r"забудьте|отбрось|отбросьте|отмени|отмените)\s+(вс[её]\s+|все\s+)?"
            r"(предыдущие|прежние|прошлые|вышеуказанные|предшествующие|старые)\s+"
            r"(инструкции|указания|правила|команды|сообщения|промпты)(?!\w)",
        ),
        ("system prompt (ru)", r"(?<!\w)системн\w*\s+промпт"),
        ("new instructions (ru)", r"(?<!\w)новые\s+(инструкции|указания)\s*:"),
        # Chinese (simplified and traditional): no word boundaries between CJK characters.
        (
            "ignore previous instructions (zh)",
            r"(忽略|无视|無視|忽视|忽視|忘记|忘記|不要理会|不要理會)\s*掉?\s*(所有|全部|一切)?\s*"
            r"(之前|以前|先前|前面|上面|以上|上述)\s*的?\s*(所有|全部|一切)?\s*的?\s*"
            r"(指令|指示|说明|說明|规则|規則|提示|命令|要求)",
        ),
        ("system prompt (zh)", r"系统提示词|系統提示詞"),
        ("new instructions (zh)", r"新的?(指令|指示)\s*:"),
        # Japanese
        (
            "ignore previous instructions (ja)",
            r"(以前|前|これまで|上記|先ほど|今まで)の\s*(すべての|全ての)?\s*"
            r"(指示|命令|ルール|指令|プロンプト)\s*(を|は)?\s*(すべて|全て)?\s*(無視|忘れ)",
        ),
        ("system prompt (ja)", r"システムプロンプト"),
    )
)


def _firewall_fold(text: str) -> str:
    """What the firewall patterns see: NFKC (full-width letters and punctuation become plain),
    invisible format characters removed, accents dropped from Latin letters, and case folded.
    Marks on other scripts stay: 'й' and Japanese voiced kana are letters of their own."""
    decomposed = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
    kept: list[str] = []
    base = ""
    for char in decomposed:
        if unicodedata.category(char) == "Cf":
            continue  # zero-width space, soft hyphen: they split words without showing
        if unicodedata.combining(char):
            if base.isascii():
                continue
        else:
            base = char
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept)).casefold()


@lru_cache(maxsize=4096)
def _term_pattern(term: str) -> re.Pattern[str]:
    # Whole words, any spacing/hyphen between words, simple inflections on the last word.
    words = [re.escape(word) for word in re.split(r"[\s\-]+", term.strip()) if word]
    body = r"[\s\-]+".join(words)
    return re.compile(rf"(?<!\w){body}(?:s|es|ed|ing)?(?!\w)", re.IGNORECASE)


def _normalize(text: str) -> str:
    # NFKC folds full-width and compatibility letters so they cannot dodge the word rules.
    return unicodedata.normalize("NFKC", text)


def find_terms(text: str, terms: Sequence[str]) -> tuple[str, ...]:
    """Terms that occur in `text` as whole words (case-insensitive), in the profile's order."""
    normalized = _normalize(text)
    return tuple(term for term in terms if term.strip() and _term_pattern(term).search(normalized))


def classify(text: str, profile: SafetyProfile) -> SafetyDecision:
    """Block prompt-injection markers first, then blocked terms; cautions are allowed but noted."""
    folded = _firewall_fold(text)
    injections = tuple(
        f"prompt injection marker {label!r}"
        for label, pattern in _PROMPT_INJECTION_PATTERNS
        if pattern.search(folded)
    )
    if injections:
        return SafetyDecision(verdict="block", rule="prompt_firewall", reasons=injections)
    normalized = _normalize(text)
    blocked = find_terms(normalized, profile.blocked_terms)
    if blocked:
        reasons = tuple(f"blocked term {term!r} ({profile.name})" for term in blocked)
        return SafetyDecision(verdict="block", rule="blocked_term", reasons=reasons)
    cautions = find_terms(normalized, profile.caution_terms)
    if cautions:
        reasons = tuple(f"caution term {term!r} ({profile.name})" for term in cautions)
        return SafetyDecision(verdict="allow", rule="caution_term", reasons=reasons)
    return SafetyDecision(verdict="allow", rule="no_match", reasons=())
