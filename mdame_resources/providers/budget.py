"""What a provider needs from the running step to spend money: the fenced state store, the
dimension (its daily budget, models and prices) and the step's checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mdame_core.state import StateStore
from mdame_domain.dimensions import DimensionConfig
from mdame_domain.paid_calls import ModelPrice


def _no_checkpoint() -> None:
    return None


@dataclass(frozen=True)
class CallContext:
    """Passed by an asset to a paid provider. `state` must be the step's fenced view: every
    ledger write carries the pipeline lock's token. `checkpoint` runs before each paid call."""

    state: StateStore
    dimension: DimensionConfig
    checkpoint: Callable[[], None] = field(default=_no_checkpoint)

    @property
    def prices(self) -> dict[str, ModelPrice]:
        return {model: ModelPrice(i, o) for model, i, o in self.dimension.gemini_prices}


class BudgetExhausted(RuntimeError):
    """The dimension's daily budget cap is reached: its paid work stops for the day. Nothing
    was reserved or sent for the refused call; the database recorded a 'budget_exhausted'
    event on the dimension."""

    def __init__(self, dimension: str, period: str | None, needed_micros: int) -> None:
        super().__init__(
            f"daily budget of dimension {dimension!r} is exhausted for {period}: a call "
            f"needing {needed_micros} micro-dollars does not fit under the cap "
            "(daily_budget_usd in its YAML); paid work for it stops until the next day"
        )
        self.dimension, self.period, self.needed_micros = dimension, period, needed_micros
