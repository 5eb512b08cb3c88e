"""What a resource's health check answers (`mdame doctor` prints it): one finding per thing it
checked, each with its verdict and a message naming the cause and the fix, never a secret.

A health check runs on the resource as the definitions build it: a secret or an endpoint given
as a dg.EnvVar is read when the check runs, as a run reads it when it builds the resource.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, MutableMapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import dagster as dg

from mdame_core import settings
from mdame_domain.doctor import Status

if TYPE_CHECKING:
    from mdame_core.state import StateStore
    from mdame_domain.dimensions import DimensionConfig


@dataclass(frozen=True)
class Health:
    """One finding: OK, WARN or FAIL, and a one-line message (the cause and the fix). `subject`
    names what within the provider it is about (a model, an account); empty for the provider
    as a whole."""

    status: Status
    message: str
    subject: str = ""


@dataclass(frozen=True)
class HealthScope:
    """What a check covers beyond the resource's own settings: the active dimensions' configs
    (their models and voices), every active dimension's slug, parsed or not (their chats and
    accounts), a state store to read accounts and grants through, and `lock`: a dimension's
    pipeline lock held for a block, yielding the fenced store (None while a run holds it), for
    a check whose call may rotate a grant that only the lock's holder may store. `answers`:
    what the checks of one doctor run were answered, by question, so that two providers asking
    the same (a models.get of one model with one key at one endpoint) ask it once."""

    dimensions: Sequence[DimensionConfig] = ()
    slugs: Sequence[str] = ()
    state: StateStore | None = None
    lock: Callable[[str], AbstractContextManager[StateStore | None]] | None = None
    answers: MutableMapping[Hashable, Any] | None = None


def setting(resource: dg.ConfigurableResource, field: str) -> tuple[str, str]:
    """A field's value as a run would see it, and its name for a message: a dg.EnvVar field
    reads its variable now ('' when unset) and is named by it; a plain one is named
    `Class.field`."""
    raw = getattr(resource, field)
    if isinstance(raw, dg.EnvVar):
        return settings.raw(raw.env_var_name), raw.env_var_name
    return str(raw or ""), f"{type(resource).__name__}.{field}"


R = TypeVar("R", bound=dg.ConfigurableResource)


def resolved(resource: R, **overrides: Any) -> R:
    """A copy of `resource` with its dg.EnvVar fields read now ('' when unset), as a run builds
    it, and `overrides` applied (a health check's own timeout and retries). The variables are
    read through the settings reader, so each must be a declared setting."""
    values: dict[str, Any] = {}
    for name in type(resource).model_fields:
        raw = getattr(resource, name)
        values[name] = settings.raw(raw.env_var_name) if isinstance(raw, dg.EnvVar) else raw
    return type(resource)(**{**values, **overrides})
