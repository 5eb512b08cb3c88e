"""Where a process's time goes: wall seconds per category of work, summed in this process.

`with spent("encode"):` around a piece of work adds its wall time to the category's total;
`totals()` reads them and `reset()` starts over. The categories are the leaf operations of a
partition's runs (an ffmpeg encode, a probe, a database round trip ...): `mdame demo` prints
them next to the wall time of its runs, and what they leave is Dagster's own start-up and
orchestration. A category inside another counts once: the inner time is taken out of the outer
(per thread), so a provider that writes to the database while it makes a clip gives those
round trips to "database", not to "scene clips". Threads add up: a background thread's work (a
lock's heartbeat) overlaps the runs' own, which is why the remainder is floored at zero.

It lives here, with no import of its own beyond the standard library, because every layer that
does such work can import mdame_domain: the domain's media code, the state client in mdame_core
(which already builds on mdame_domain's records), the providers and the assets. No Dagster and
no I/O: a span costs a clock read, a list push and a locked dict update.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from time import perf_counter
from typing import Literal, get_args

Category = Literal["encode", "scene clips", "voice", "probes", "hashing and copies", "database"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
REMAINDER = "Dagster run start-up and orchestration"

_lock = threading.Lock()
_totals: dict[str, float] = {}
_local = threading.local()  # .open: the inner seconds of each span this thread is inside


@contextmanager
def spent(category: Category) -> Iterator[None]:
    """Adds the block's own wall time (less any span inside it) to `category`."""
    opened: list[float] | None = getattr(_local, "open", None)
    if opened is None:
        opened = _local.open = []
    opened.append(0.0)
    started = perf_counter()
    try:
        yield
    finally:
        elapsed = perf_counter() - started
        inner = opened.pop()
        if opened:
            opened[-1] += elapsed
        with _lock:
            _totals[category] = _totals.get(category, 0.0) + elapsed - inner


def totals() -> dict[str, float]:
    """Seconds per category since the last reset (a category with none is absent)."""
    with _lock:
        return dict(_totals)


def since(before: Mapping[str, float]) -> dict[str, float]:
    """Seconds per category spent after `before` (an earlier `totals()`) was read."""
    return {name: s - before.get(name, 0.0) for name, s in totals().items()}


def reset() -> None:
    with _lock:
        _totals.clear()


def breakdown_lines(wall_s: float, seconds: Mapping[str, float]) -> list[str]:
    """A heading, then a line per category and one for the remainder of `wall_s`: seconds and
    share of the wall time."""
    rows: list[tuple[str, float]] = [(name, seconds.get(name, 0.0)) for name in CATEGORIES]
    rows.append((REMAINDER, max(0.0, wall_s - sum(s for _, s in rows))))
    width = max(len(name) for name, _ in rows)
    lines = [f"time: {wall_s:.1f} s of runs"]
    for name, s in rows:
        share = 100 * s / wall_s if wall_s > 0 else 0.0
        lines.append(f"  {name:<{width}} {s:7.1f} s {share:4.0f}%")
    return lines
