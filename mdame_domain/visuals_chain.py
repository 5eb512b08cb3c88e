"""A dimension's visuals chain: the engines that may make a scene's picture, in order.

The first engine whose clip passes the relevance gate wins; a rejected candidate is followed by
the next candidate of the same engine, then by the next engine, up to the gate's per-scene cap.
A scene that nothing passes has no picture, and its script is rejected with the reasons: it is
never published with an unrelated picture.

Which engines run depends on the deployment as well as the YAML: the offline providers make
every scene procedurally (offered: procedural only), the local protocol servers offer the
network engines but no GPU, production offers them all. `effective_chain` is the chain a scene
is made with there, and `chain_key` what of it goes into the scene hash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

DIFFUSERS, GENERATED, STOCK, PROCEDURAL = "diffusers", "generated", "stock", "procedural"
ENGINES = (DIFFUSERS, GENERATED, STOCK, PROCEDURAL)
# What runs on any host: a still from an image model, then stock footage.
DEFAULT_CHAIN = (GENERATED, STOCK)
# Engines whose candidates the relevance gate judges (a procedural clip shows no subject).
JUDGED = frozenset({DIFFUSERS, GENERATED, STOCK})


class ChainError(ValueError):
    """The chain names no engine this deployment runs."""


def parse_chain(value: object) -> tuple[str, ...]:
    """The chain from a YAML value (a list of engine names, each once); ValueError naming
    what is wrong."""
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"must be a non-empty list of engines from {', '.join(ENGINES)}")
    chain = tuple(value)
    unknown = [e for e in chain if e not in ENGINES]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not an engine (expected {', '.join(ENGINES)})")
    if len(set(chain)) != len(chain):
        raise ValueError("names an engine twice")
    return chain


def effective_chain(chain: Sequence[str], offered: Iterable[str]) -> tuple[str, ...]:
    """The engines of `chain` this deployment runs, in order. A deployment that offers the
    procedural stand-in (offline, the local servers) falls back to it when none of the chain's
    engines runs there; production has no stand-in, and ChainError says which engine is
    missing."""
    offers = tuple(offered)
    kept = tuple(e for e in chain if e in offers)
    if kept:
        return kept
    if PROCEDURAL in offers:
        return (PROCEDURAL,)
    raise ChainError(
        f"visuals.chain {list(chain)} names no engine this deployment runs "
        f"(it runs {', '.join(offers) or 'none'})"
    )


def chain_key(engine_keys: Mapping[str, str | None], judge_key: str | None) -> str | None:
    """What of the chain changes a scene's picture, for the scene hash: each engine's own key
    in order, and the gate's. The procedural stand-in alone keeps its old keys (None when its
    own is None), so the offline cache survives the chain."""
    if list(engine_keys) == [PROCEDURAL]:
        return engine_keys[PROCEDURAL]
    parts = [f"{engine}={key or ''}" for engine, key in engine_keys.items()]
    if judge_key and any(e in JUDGED for e in engine_keys):
        parts.append(f"gate={judge_key}")
    return "chain:" + "|".join(parts)


def candidate_label(engine: str, candidate: int | str) -> str:
    """How a scene's record names a candidate: 'generated#0', 'stock#pexels:123'."""
    return f"{engine}#{candidate}"
