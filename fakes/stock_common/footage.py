"""The footage a stock server offers for a query: its subject, the fixed mix of roles (not
all usable, on purpose), each video's id, author and renditions."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from fakes import imagery

ROLES = ("on_topic", "landscape", "off_topic", "too_short", "low_res", "small_landscape")
# Subjects no narration of the tests or the demo says, each far from the others in colour.
OFF_TOPIC_WORDS = (
    "umbrella", "pineapple", "lighthouse", "saxophone", "cactus", "penguin", "bicycle",
    "volcano", "accordion", "flamingo",
)  # fmt: skip
AUTHORS = (
    "Mika Sato", "Ana Lima", "Jonas Berg", "Priya Nair", "Tom Okafor", "Lea Novak",
    "Ravi Menon", "Sofia Costa",
)  # fmt: skip
PORTRAIT_LADDER = ((1080, 1920), (720, 1280), (540, 960), (360, 640))
LANDSCAPE_LADDER = ((1920, 1080), (1280, 720), (960, 540), (640, 360))
LADDERS: dict[str, tuple[tuple[int, int], ...]] = {
    "portrait": PORTRAIT_LADDER,
    "landscape": LANDSCAPE_LADDER,
    "low_res": ((90, 160),),
    "small_landscape": ((256, 144),),
}


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


@dataclass(frozen=True)
class Footage:
    """One video a server offers: what it shows, its renditions (largest first)."""

    source: str
    role: str
    word: str
    id: int
    seconds: int
    fps: int
    renditions: tuple[tuple[int, int], ...]
    author: str
    author_id: int

    @property
    def width(self) -> int:
        return self.renditions[0][0]

    @property
    def height(self) -> int:
        return self.renditions[0][1]

    @property
    def portrait(self) -> bool:
        return self.height > self.width

    def file_path(self, width: int, height: int) -> str:
        return (
            f"video-files/{self.id}/{self.word}-{width}x{height}-{self.fps}fps-{self.seconds}s.mp4"
        )

    def picture_path(self) -> str:
        return f"video-pictures/{self.id}-{self.word}.png"


@dataclass(frozen=True)
class Slot:
    """A place in a source's answer: the role, its shape, its length and frame rate."""

    role: str
    shape: str  # a LADDERS key
    seconds: int
    fps: int


def off_topic_word(query: str) -> str:
    """The other subject a query's off-topic footage shows: never a word of the query, and
    far in colour from its subject (so the image judge tells them apart)."""
    subject = imagery.depicted_word(query)
    said = set(imagery.subject_words(query))
    start = _digest("off", subject) % len(OFF_TOPIC_WORDS)
    mine = imagery.colours_of(subject)
    for i in range(len(OFF_TOPIC_WORDS)):
        word = OFF_TOPIC_WORDS[(start + i) % len(OFF_TOPIC_WORDS)]
        far = imagery._distance(imagery.colours_of(word), mine) > 2 * imagery.MATCH_DISTANCE
        if word not in said and far:
            return word
    raise AssertionError(f"no off-topic word far from {subject!r}")  # ten words: never


def leads_off_topic(query: str) -> bool:
    """Whether the off-topic footage comes first for this query (about half of them)."""
    return _digest("lead", imagery.depicted_word(query)) % 2 == 0


def catalogue(
    source: str, query: str, template: tuple[Slot, ...], off_topic_first: bool | None = None
) -> list[Footage]:
    """The footage a search for `query` finds, in the API's order (see the module docstring);
    [] for a query with no subject."""
    subject = imagery.depicted_word(query)
    if subject == "nothing":
        return []
    first = leads_off_topic(query) if off_topic_first is None else off_topic_first
    slots = [s for s in template if s.role != "off_topic"]
    off = [s for s in template if s.role == "off_topic"]
    ordered = off + slots if first else slots + off
    found = []
    for slot in ordered:
        word = off_topic_word(query) if slot.role == "off_topic" else subject
        seed = _digest(source, slot.role, word)
        found.append(
            Footage(
                source=source,
                role=slot.role,
                word=word,
                id=1_000_000 + seed % 9_000_000,
                seconds=slot.seconds,
                fps=slot.fps,
                renditions=LADDERS[slot.shape],
                author=AUTHORS[seed % len(AUTHORS)],
                author_id=10_000 + seed % 90_000,
            )
        )
    return found
