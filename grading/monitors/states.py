"""A monitor's next state from its figure: the one rule, hysteresis included, pure Python.

1. Fewer than `min_n` items behind the figure: no data, whatever the figure.
2. Otherwise each level is crossed when the figure is past it in the monitor's direction (below the level, for a
   pass rate; above it, for an error share). Exactly at the level is not past it.
3. Hysteresis: a level the monitor is at (or beyond) holds until the figure is back past it by `margin`. So with a
   warning below 0.90, an alert below 0.80 and a margin of 0.02, an alert holds at 0.81 and becomes a warning at
   0.82; the warning becomes ok at 0.92. A figure hovering at a level therefore changes the state once, not at
   every evaluation. Getting worse is never delayed; leaving no data is not either (there was no level to hold).
"""

from __future__ import annotations

from dataclasses import dataclass

from grading.models import Direction, MonitorState

SEVERITY = {MonitorState.OK: 0, MonitorState.WARNING: 1, MonitorState.ALERT: 2}


@dataclass(frozen=True)
class Levels:
    direction: str
    warning: float
    alert: float
    margin: float
    min_n: int


def state_next(*, value: float | None, n: int, previous: str, levels: Levels) -> str:
    """The state a monitor is in after an evaluation that found `value` over `n` items, coming from `previous`
    ("" for a monitor never evaluated)."""
    if value is None or n < levels.min_n:
        return MonitorState.NO_DATA
    held = SEVERITY.get(previous, 0)
    if _past(value, levels.alert, levels, holding=held >= SEVERITY[MonitorState.ALERT]):
        return MonitorState.ALERT
    if _past(value, levels.warning, levels, holding=held >= SEVERITY[MonitorState.WARNING]):
        return MonitorState.WARNING
    return MonitorState.OK


def _past(value: float, level: float, levels: Levels, *, holding: bool) -> bool:
    """Whether `value` is past `level` in the bad direction; a level being held is left only `margin` beyond it."""
    shift = levels.margin if holding else 0.0
    # Rounded: 0.8 + 0.02 is 0.8200000000000001 in binary, and a figure of 0.82 has cleared that level.
    if levels.direction == Direction.BELOW:
        return value < round(level + shift, 9)
    return value > round(level - shift, 9)
