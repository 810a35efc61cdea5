"""Static buffer sizes learned at run time: the plan ``jta.checked`` traces a function with.

XLA needs every buffer's size while tracing, but a loop whose length the data decides tells
how many rows its stacks need only when it has run. ``jta.checked`` therefore traces with a
*plan* (loop number -> rows) and the derivative of each ``jta.while_loop`` sizes its stacks
from it; a loop that runs past its rows reports so through the error channel
(:data:`Error.LOOP_STACK_FULL`), and ``jta.checked`` grows the plan geometrically, compiles
again and reruns. The plan is kept, so the next call of the same shapes compiles nothing.
Outside ``jta.checked`` there is no plan: a loop's stacks have ``maximum_iterations`` rows.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Optional

from .._channel.catalogue import Error

__all__ = ["Plan", "active", "planned", "planned_rows", "rows_for", "grown"]

INITIAL_ROWS = 256  # a loop with no bound, or a larger one, starts with this many rows


@dataclasses.dataclass
class Plan:
    """Rows per loop, by the order in which a trace reaches the loops' derivatives."""

    rows: dict[int, int]
    seen: int = 0


_PLAN: contextvars.ContextVar[Optional[Plan]] = contextvars.ContextVar("jta_capacity_plan", default=None)


@contextlib.contextmanager
def planned(rows: dict[int, int]) -> Iterator[None]:
    """Trace with the learned ``rows`` (loop number -> rows); loops are numbered from 0."""
    token = _PLAN.set(Plan(dict(rows)))
    try:
        yield
    finally:
        _PLAN.reset(token)


def active() -> bool:
    """Whether a plan sizes the stacks (the trace runs under ``jta.checked``)."""
    return _PLAN.get() is not None


def planned_rows() -> Optional[tuple[int, int]]:
    """``(rows, loop)`` for the next loop of a plan (``loop``: its number), or ``None`` outside
    ``jta.checked``. Whoever asks must report :data:`Error.LOOP_STACK_FULL` when the loop
    outruns the rows."""
    plan = _PLAN.get()
    if plan is None:
        return None
    loop, plan.seen = plan.seen, plan.seen + 1
    return plan.rows.get(loop, INITIAL_ROWS), loop


def rows_for(bound: Optional[int]) -> tuple[int, Optional[int]]:
    """``(rows, loop)`` for the stacks of a loop bounded by ``bound`` (``None``: unbounded):
    ``loop`` is its number in the plan, or ``None`` when its rows cannot run out (no plan, or
    the bound fits)."""
    planned = planned_rows()
    if planned is None:
        if bound is None:
            Error.LOOP_NEEDS_BOUND.raise_()
        return bound, None
    rows, loop = planned
    if bound is not None and bound <= rows:
        return bound, None
    return rows, loop


def grown(rows: dict[int, int], loop: int, steps: int) -> dict[int, int]:
    """The plan with ``loop`` given room for ``steps`` rows (doubling: a loop that grows step by
    step recompiles a logarithmic number of times)."""
    have = rows.get(loop, INITIAL_ROWS)
    while have < steps:
        have *= 2
    return {**rows, loop: have}
