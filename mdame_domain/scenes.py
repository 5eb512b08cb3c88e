"""Scene planning: split a script into 5-10 scenes, each with a cache key for its clip."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mdame_domain.idempotency import idempotency_key
from mdame_domain.writer import STOPWORDS, Script

MAX_ON_SCREEN_WORDS = 8
MAX_PROMPT_SUBJECT_WORDS = 12
MIN_SPLIT_PART_WORDS = 3

_CLAUSE_BREAK = re.compile(r"[,;:.!?]\s+|[.!?]$")
_PUNCTUATION_EDGES = "\"'()[]{}.,;:!?\u201c\u201d\u2018\u2019-\u2013\u2014"


@dataclass(frozen=True)
class ScenePlan:
    index: int
    on_screen_text: str
    narration: str
    visual_prompt: str
    style: str
    duration_weight: float
    scene_hash: str


def scene_hash(
    visual_prompt: str, style: str, dimension_slug: str, visuals_key: str | None = None
) -> str:
    """The scene-cache key: sha256 of "visual_prompt:style:dimension_slug".

    The separator keeps ("ab", "c") and ("a", "bc") apart; anything that changes the picture
    changes the key, and nothing else does (the scene index is deliberately not part of it).
    visuals_key names what makes the clip when that changes the picture (a diffusers engine and
    its models, see VisualsResource.cache_key): another generator's clip is then not a hit.
    None (the procedural clips) keeps the keys the cache had before generated visuals.
    """
    if visuals_key is None:
        return idempotency_key(visual_prompt, style, dimension_slug)
    return idempotency_key(visual_prompt, style, dimension_slug, visuals_key)


# --- grouping body sentences into the allowed number of scenes --------------------------------


def _word_count(text: str) -> int:
    return len(text.split())


def _merge_smallest_neighbours(units: list[str]) -> list[str]:
    # Merging the lightest adjacent pair keeps scene lengths even; ties go to the leftmost pair.
    pair_sizes = [_word_count(units[i]) + _word_count(units[i + 1]) for i in range(len(units) - 1)]
    i = pair_sizes.index(min(pair_sizes))
    return [*units[:i], f"{units[i]} {units[i + 1]}", *units[i + 2 :]]


def _best_cut(words: list[str]) -> int:
    # Prefer a clause break near the middle; fall back to the middle word.
    allowed = range(MIN_SPLIT_PART_WORDS, len(words) - MIN_SPLIT_PART_WORDS + 1)
    middle = len(words) / 2
    clause_cuts = [cut for cut in allowed if words[cut - 1][-1] in ",;:"]
    if clause_cuts:
        return min(clause_cuts, key=lambda cut: (abs(cut - middle), cut))
    return len(words) // 2


def _split_longest(units: list[str]) -> list[str] | None:
    sizes = [_word_count(unit) for unit in units]
    i = sizes.index(max(sizes))
    if sizes[i] < 2 * MIN_SPLIT_PART_WORDS:
        return None
    words = units[i].split()
    cut = _best_cut(words)
    return [*units[:i], " ".join(words[:cut]), " ".join(words[cut:]), *units[i + 1 :]]


def _body_units(body: list[str], target_min: int, target_max: int) -> list[str]:
    units = [sentence for sentence in body if sentence.strip()]
    if not units:
        raise ValueError("cannot plan scenes: the script has no body sentences")
    while len(units) > target_max:
        units = _merge_smallest_neighbours(units)
    while len(units) < target_min:
        split = _split_longest(units)
        if split is None:
            raise ValueError(
                f"cannot plan scenes: the body is too short to fill {target_min} body scenes"
            )
        units = split
    return units


# --- per-scene text ----------------------------------------------------------------------------


def _clean_word(word: str) -> str:
    return word.strip(_PUNCTUATION_EDGES)


_PRONOUN_TEXT = "i me my we us our you your he him his she her they them"
_PRONOUNS = frozenset(_PRONOUN_TEXT.split())


def _content_words(text: str) -> list[str]:
    words = (_clean_word(word) for word in text.split())
    return [word for word in words if word and word.lower() not in STOPWORDS]


def _picturable_words(text: str) -> list[str]:
    # Pronouns name the viewer, not anything a camera could show.
    return [word for word in _content_words(text) if word.lower() not in _PRONOUNS]


def on_screen_phrase(narration: str) -> str:
    """A short key phrase (<= 8 words): the first clause, or its content words when too long."""
    first_clause = next(
        (part for part in _CLAUSE_BREAK.split(narration) if _word_count(part) >= 2),
        narration,
    )
    words = [w for w in (_clean_word(word) for word in first_clause.split()) if w]
    if len(words) <= MAX_ON_SCREEN_WORDS:
        return " ".join(words)
    words = _content_words(first_clause)[:MAX_ON_SCREEN_WORDS] or words[:MAX_ON_SCREEN_WORDS]
    return " ".join(words)


def _theme(dimension_slug: str) -> str:
    return " ".join(re.split(r"[-_\s]+", dimension_slug)).strip()


def _visual_prompt(role: str, narration: str, style: str, dimension_slug: str) -> str:
    framing = f"{style} style, vertical 9:16 composition, no text or logos"
    if role == "cta":
        # The same closing picture for every video of a dimension, so the clip cache reuses it.
        return f"Warm closing shot themed around {_theme(dimension_slug)}, calm motion, {framing}"
    if role == "hook":  # the hook's first sentence is the topic; the rest is a question to you
        narration = re.split(r"(?<=[.!?])\s+", narration, maxsplit=1)[0]
    subject = " ".join(_picturable_words(narration)[:MAX_PROMPT_SUBJECT_WORDS]) or _theme(
        dimension_slug
    )
    opening = "Bold attention-grabbing opening shot" if role == "hook" else "Explanatory scene"
    return f"{opening} showing {subject}, {framing}"


def plan_scenes(
    script: Script,
    style: str,
    dimension_slug: str,
    min_scenes: int = 5,
    max_scenes: int = 10,
    visuals_key: str | None = None,
) -> list[ScenePlan]:
    """Scene 0 is the hook, the last scene the call to action, the body fills the rest.

    Body sentences are merged (lightest neighbours first) or split (longest first, at a clause
    break near the middle) until the total is within [min_scenes, max_scenes]. duration_weight
    is the scene's share of the narration words, so the weights sum to 1.
    """
    if min_scenes < 3 or max_scenes < min_scenes:
        raise ValueError(f"invalid scene bounds: min_scenes={min_scenes}, max_scenes={max_scenes}")
    if not style.strip() or not dimension_slug.strip():
        raise ValueError("plan_scenes needs a non-empty style and dimension_slug")
    if not script.hook.strip() or not script.call_to_action.strip():
        raise ValueError("cannot plan scenes: the script has no hook or no call to action")
    body = _body_units(list(script.body_sentences), min_scenes - 2, max_scenes - 2)
    narrations = [("hook", script.hook), *(("body", u) for u in body)]
    narrations.append(("cta", script.call_to_action))
    total_words = sum(_word_count(text) for _, text in narrations)
    scenes: list[ScenePlan] = []
    for index, (role, narration) in enumerate(narrations):
        prompt = _visual_prompt(role, narration, style, dimension_slug)
        scenes.append(
            ScenePlan(
                index=index,
                on_screen_text=on_screen_phrase(narration),
                narration=narration,
                visual_prompt=prompt,
                style=style,
                duration_weight=round(_word_count(narration) / total_words, 6),
                scene_hash=scene_hash(prompt, style, dimension_slug, visuals_key),
            )
        )
    return scenes


# --- stock footage searches ----------------------------------------------------------------

MAX_SEARCH_QUERIES = 3
SEARCH_QUERY_WORDS = 2
MAX_SEARCH_QUERY_CHARS = 100  # Pixabay refuses a longer q
# Words a narration uses that no stock clip is of: filler verbs, adverbs, quantifiers and
# abstractions, and the call to action's vocabulary.
_NOT_VISUAL_TEXT = """
    about above across actually add after again against ago all almost already also always
    amazing another any anyone anything around away back basics because become been before
    begin being below best better between beyond big bigger both bring came can cannot catch
    catches change changes closer come comes comment comments could day days develop
    develops did different does done down during each easy else enough even ever every
    everyone everything fact far few find first follow found get gets getting give given
    goes going gone good got great had happen happens held help here high hold holds just
    keep kind know knowing known last later learn least less let like likely little long
    look lot made make makes many matter may maybe mean means might more most much must need
    needs never new next nothing now off often old once one only other others out over part
    people perhaps point put quite rather real really reveal reveals right same say says see
    seem seems shaping share should show shows since small some someone something soon start
    still stories story subscribe such sure take takes tell than thing things think those
    though through time times today together told too took turn under until unveil unveils
    upon use used using very want wants way ways well went whether while whole why worth
    would year years yet
    """
_NOT_VISUAL = frozenset(_NOT_VISUAL_TEXT.split())


def _searchable(text: str) -> list[str]:
    """The picturable words a stock search can use, lowercase, each once, in order: no digits,
    no filler (_NOT_VISUAL), no -ly adverbs or past tenses (a search for "filmed" finds
    nothing a scene shows), a possessive's noun without its 's."""
    words: list[str] = []
    for raw in _picturable_words(text):
        word = raw.lower().removesuffix("'s").removesuffix("\u2019s").strip("'")
        if len(word) < 3 or not word.replace("-", "").isalpha() or word in _NOT_VISUAL:
            continue
        if word.endswith("ly") or (word.endswith("ed") and len(word) > 5):
            continue
        if word not in words:
            words.append(word)
    return words


def search_queries(
    narration: str,
    fallback: str = "",
    max_queries: int = MAX_SEARCH_QUERIES,
    words_per_query: int = SEARCH_QUERY_WORDS,
) -> list[str]:
    """2-3 stock footage searches for a scene, from its narration's concrete words in the
    order it says them: consecutive pairs ("researchers honeybees"), then, when that makes
    fewer than two, a word of the first pair alone, its last first (the head of an English
    noun phrase: "honeybees"). `fallback` (the dimension's theme) stands in when the
    narration names nothing a camera could film, and is the second search when it names one
    word only; [] when neither names anything. Deterministic: the same narration always
    searches the same terms."""
    if max_queries < 1 or words_per_query < 1:
        raise ValueError("search_queries wants max_queries and words_per_query of 1 or more")
    words = _searchable(narration) or _searchable(fallback)
    if not words:
        return []
    chunks = [words[i : i + words_per_query] for i in range(0, len(words), words_per_query)]
    queries = [" ".join(chunk)[:MAX_SEARCH_QUERY_CHARS] for chunk in chunks[:max_queries]]
    for word in reversed(chunks[0]):
        if len(queries) >= min(2, max_queries):
            break
        if word not in queries:
            queries.append(word)
    theme = " ".join(_searchable(fallback)[:words_per_query])[:MAX_SEARCH_QUERY_CHARS]
    if len(queries) < min(2, max_queries) and theme and theme not in queries:
        queries.append(theme)
    return queries
