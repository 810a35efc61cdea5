"""Static buffer sizes learned at run time: the plan ``jta.checked`` traces a function with.

XLA needs every buffer's size while tracing, but a loop whose length the data decides tells
how many rows its stacks need only when it has run. ``jta.checked`` therefore traces with a
*plan*, and what needs a size the data decides takes it from there, numbered in the order the
trace reaches it: the stacks of each ``jta.while_loop``'s derivative (and of an imported loop's
gradient), and each ``dynamic_size`` ``TensorArray`` created without ``capacity=``
(``("rows", k)``: its buffer's rows; ``("size", k)``: the size its ``stack()`` returns;
``("varies", k)``: that size differed between the steps of one run). Whatever
outgrows its plan reports so through the error channel (:data:`Error.LOOP_STACK_FULL`, an
array's :data:`Error.WRITE_BEYOND_CAPACITY`, :data:`Error.ARRAY_SIZE_LEARNED`), and
``jta.checked`` updates the plan (rows grow geometrically), compiles again and reruns. The plan
is kept, so the next call of the same shapes compiles nothing. Outside ``jta.checked`` there is
no plan: a loop's stacks have ``maximum_iterations`` rows, an array needs ``capacity=``.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Literal, Optional, Union

from jax._src import config as jax_config

from .. import errors
from .._records import records
from .._records.catalogue import Error
from .._records.primitives import emit
from .array import ArrayData, known_size

__all__ = ["Plan", "active", "probing", "array_plan", "planned", "planned_rows", "report_full", "learned_rows", "learned_count", "probed_size", "CountNeeded", "learned_size", "rows_for", "stack_rows", "grown", "sized", "alike", "LearnsPerStep", "learning_refused", "SizeProbe", "at_site"]

INITIAL_ROWS = 256  # a loop with no bound, or a larger one, starts with this many rows
UNPLANNED = -1  # the number of a loop whose stacks no plan sizes (see :func:`rows_for`)


Key = tuple[str, int]  # ("rows", k), ("size", k) or ("varies", k)


@dataclasses.dataclass
class Plan:
    """Sizes by key; ``seen`` numbers what asks for one, in trace order; ``unsized``: the numbers
    whose ``stack()`` asked for a size not learned yet; ``guessed``: every number given a guess."""

    sizes: dict[Key, int]
    seen: int = 0
    unsized: list[int] = dataclasses.field(default_factory=list)
    guessed: list[int] = dataclasses.field(default_factory=list)  # sizes given a guess, in trace order
    probe: Optional[int] = None  # the last number whose size :class:`SizeProbe` hands out
    probed: dict[int, Any] = dataclasses.field(default_factory=dict)  # the guessed sizes until then
    keyed: dict[Hashable, int] = dataclasses.field(default_factory=dict)  # the numbers of what named itself
    most: dict[int, int] = dataclasses.field(default_factory=dict)  # the largest each guessed size can be


_PLAN: contextvars.ContextVar[Optional[Plan]] = contextvars.ContextVar("jta_capacity_plan", default=None)


# The plan is part of JAX's trace context too, so that a ``jax.jit`` inside the checked function
# traces again with each plan (a trace cached under another plan would never see the sizes learned).
_PLAN_IN_TRACE_CONTEXT = jax_config.string_or_object_state(
    "jta_capacity_plan", None, "jta.checked's learned sizes (jta._core.capacities); set by jta only",
    include_in_trace_context=True)


class SizeProbe(Exception):
    """Raised by :func:`learned_rows` at the plan's ``probe``: ``sizes`` are the traced sizes guessed
    until there, by number, which a program that stops there (:func:`planned` with ``probe=``)
    returns. Caught by ``jta.checked``."""

    def __init__(self, sizes: dict[int, Any]):
        super().__init__("sizes probed (jta.checked catches this)")
        self.sizes = sizes


@contextlib.contextmanager
def planned(sizes: dict[Key, int], probe: Optional[int] = None) -> Iterator[Plan]:
    """Trace with the learned ``sizes``; yields the plan, which the trace numbers. ``probe``: the
    number whose guess raises :class:`SizeProbe` with the sizes guessed until then (a trace that
    failed with a guessed size, say 0 rows added to a fixed shape, learns the sizes from a program
    that stops where the last is asked for)."""
    plan = Plan(dict(sizes), probe=probe)
    token = _PLAN.set(plan)
    try:
        with _PLAN_IN_TRACE_CONTEXT(tuple(sorted(sizes.items()))):
            yield plan
    finally:
        _PLAN.reset(token)


# The call sites of the trace now (an importer's call ops, outermost first): a size asked for by key
# (:func:`learned_rows`) is one size at one site, and two sites running one function are two.
_SITE: contextvars.ContextVar[tuple[Hashable, ...]] = contextvars.ContextVar("jta_plan_site", default=())


@contextlib.contextmanager
def at_site(site: Hashable) -> Iterator[None]:
    """Trace inside call site ``site`` (nested in the sites around it) for :func:`learned_rows`' keys."""
    token = _SITE.set((*_SITE.get(), site))
    try:
        yield
    finally:
        _SITE.reset(token)


def probing() -> bool:
    """Whether the trace is a probe's (:func:`planned` with ``probe=``: a program that returns sizes)."""
    plan = _PLAN.get()
    return plan is not None and plan.probe is not None


def active() -> bool:
    """Whether a plan sizes the stacks (the trace runs under ``jta.checked``)."""
    return _PLAN.get() is not None


def _numbered(key: Optional[Hashable] = None) -> Optional[tuple[Plan, int]]:
    """The plan and the next number in it (what asks for a size, in trace order), or ``None``;
    ``key``: what asks, which keeps its number however often it is traced (see :func:`planned_rows`)."""
    plan = _PLAN.get()
    if plan is None:
        return None
    if key is not None and key in plan.keyed:
        return plan, plan.keyed[key]
    number, plan.seen = plan.seen, plan.seen + 1
    if key is not None:
        plan.keyed[key] = number
    return plan, number


def planned_rows(key: Optional[Hashable] = None) -> Optional[tuple[int, int]]:
    """``(rows, loop)`` for the next loop of a plan (``loop``: its number), or ``None`` outside
    ``jta.checked``. Whoever asks must :func:`report_full` when the loop outruns the rows. ``key``
    names the loop, which then keeps one number in a trace: a loop inside another loop's body is traced
    once per abstract step of that loop too, and the buffers those steps size must be the ones it runs
    with. Unlike a learned size's, the key leaves out the steps of an enclosing unrolled loop
    (:func:`at_site`): their lists have one structure (a tape pushes them into one list of lists), so
    they share one number, grown until every step's fits."""
    numbered = _numbered(key)
    if numbered is None:
        return None
    plan, loop = numbered
    return plan.sizes.get(("rows", loop), INITIAL_ROWS), loop


def report_full(loop: int, steps: Any, rows: int, name: str) -> None:
    """After loop ``loop`` of a plan: record :data:`Error.LOOP_STACK_FULL` when its ``steps``
    (traced) outran its stacks' ``rows``, which makes ``jta.checked`` grow them and rerun; after a
    loop of no plan (:data:`UNPLANNED`), :data:`Error.LOOP_STACK_UNPLANNED`, an error."""
    full = records.record(records.no_error(), steps > rows, Error.LOOP_STACK_UNPLANNED, steps, rows) \
        if loop == UNPLANNED else records.record(records.no_error(), steps > rows, Error.LOOP_STACK_FULL, loop, steps, rows)
    emit(full, name, None, deferred=False)


def array_plan() -> Optional[tuple[int, Optional[int]]]:
    """For a ``dynamic_size`` array created without ``capacity=``: ``(number, rows)``, ``rows``
    ``None`` until a trace found that the array needs a buffer (a write at a traced index, which
    raises :data:`Error.DYNAMIC_NEEDS_CAPACITY` naming ``number``); ``None`` outside a plan."""
    numbered = _numbered()
    if numbered is None:
        return None
    plan, number = numbered
    return number, plan.sizes.get(("rows", number))


def stack_rows(ta: ArrayData) -> Optional[int]:
    """The rows ``stack()`` returns, under ``jta.checked``, for an array whose size is known at run time only:
    the size learned (0 at first), with a record that makes ``jta.checked`` compile for the size
    the run saw and rerun when they differ, so the result has exactly ``size()`` rows, as in
    TensorFlow. ``None`` for any other array."""
    if known_size(ta) is not None:
        return None
    return learned_rows(ta._traced_size, ta.name, ta._meta.plan, most=ta.capacity)


class LearnsPerStep(errors.UnimplementedError):
    """Raised by :func:`learned_rows` inside :func:`learning_refused`: a loop body traced once for all
    its steps needs a size that only a run tells, and each step may see another."""


# A lax loop's body is traced once for all its steps, so a size learned there is one size for every
# step, and a run whose steps see different sizes cannot be compiled for. A caller that can unroll the
# loop instead (a short loop of a static trip count) refuses learning while it traces the body, and
# unrolls it when asked for a size: each step then learns its own. A loop whose unrolled steps would
# each run under a condition (a short bounded loop) refuses only the sizes a run saw differ ("varying"):
# one that sees the same size at every step stays a scan, compiled once.
_REFUSED: contextvars.ContextVar[Union[bool, str]] = contextvars.ContextVar("jta_learning_refused", default=False)


@contextlib.contextmanager
def learning_refused(refused: Union[bool, Literal["varying"]]) -> Iterator[None]:
    """Trace a loop body with :func:`learned_rows` raising :class:`LearnsPerStep` (``refused``; ``"varying"``:
    for a size whose steps differed in a run, ``("varies", k)``), or learning as usual (``False``: an inner
    loop that cannot be unrolled lifts an outer refusal)."""
    token = _REFUSED.set(refused)
    try:
        yield
    finally:
        _REFUSED.reset(token)


def learned_rows(size: Any, name: str, number: Optional[int] = None, stack: bool = True, first: int = 0,
                 message: Optional[Error] = None, most: Optional[int] = None, key: Optional[Hashable] = None
                 ) -> Optional[int]:
    """The rows to give a result whose length ``size`` is known at run time only (``stack()`` of a
    dynamically sized array, of an imported TensorList), under ``jta.checked``: the size learned (0 at
    first), with a record that makes ``jta.checked`` compile for the size the run saw and rerun when
    they differ. ``number``: the plan's number for it, if it has one already; ``None`` outside a plan.
    ``stack``: the result is a stack (a loop's arrays usually share their length: :func:`alike`),
    else another op's (an imported ``Where``); ``first``: the guess before a run told it; ``message``:
    the record's (by default a TensorArray's stack's, or a result's); ``most``: the largest the size can
    be, where the shapes tell (a ``Where``'s input's size, a buffer's rows), a last guess where smaller
    ones fail the trace (see ``jta.checked``); ``key``: what asks, which then keeps one number however
    often it is traced at one site (:func:`at_site`: a branch traced twice, a loop body once per abstract
    step). Inside :func:`learning_refused`, raises :class:`LearnsPerStep`."""
    refused = _REFUSED.get()
    if refused is True and active():
        raise LearnsPerStep(f"{name}: a size learned at run time inside a loop body traced for all its steps")
    if number is None:  # numbered now, in trace order like the rest
        numbered = _numbered(None if key is None else (_SITE.get(), key))
        if numbered is None:
            return None
        number = numbered[1]
    if refused == "varying" and learned_size(number, "varies") is not None:
        raise LearnsPerStep(f"{name}: a size that differed between the steps of a loop's run")
    guess = learned_size(number)
    if guess is None:
        plan = _PLAN.get()
        assert plan is not None  # (a plan numbered it)
        if number not in plan.guessed:
            plan.guessed.append(number)
        if most is not None:
            plan.most[number] = most
        if probed_size(number, size):  # (a probe: it returns the size, and records nothing about it)
            return first
        if stack:
            plan.unsized.append(number)
        guess = first
    code = message or (Error.ARRAY_SIZE_LEARNED if stack else Error.RESULT_SIZE_LEARNED)
    emit(records.record(records.no_error(), size != guess, code, size, guess, number), name, None, deferred=False)
    return guess


class CountNeeded(Exception):
    """Raised by what needs count ``number`` (:func:`learned_count`) before it can trace on, where no run
    told it yet: ``jta.checked`` learns it from a program that stops where it is computed (a probe, see
    :func:`planned`), or, where no probe can (``("unprobed", number)`` in the plan), from the whole trace."""

    def __init__(self, number: int):
        super().__init__(f"count {number} needed (jta.checked catches this)")
        self.number = number


def learned_count(key: Hashable) -> Optional[tuple[int, Optional[int]]]:
    """``(number, count)`` for a count that ``key`` (at this :func:`at_site`) learns at run time and needs
    before it can trace what follows it (the trip count of a loop whose variables change shape, which is
    unrolled to it): ``count`` is ``None`` until a run reported one (:func:`learned_rows` of ``number``).
    ``None`` outside a plan; inside :func:`learning_refused`, raises :class:`LearnsPerStep`."""
    if _REFUSED.get() is True and active():
        raise LearnsPerStep(f"{key}: a count learned at run time inside a loop body traced for all its steps")
    numbered = _numbered((_SITE.get(), key))
    return None if numbered is None else (numbered[1], learned_size(numbered[1]))


def probed_size(number: int, size: Any) -> bool:
    """In a probe (:func:`planned` with ``probe=``): hand out ``size`` (traced) as ``number``'s, and stop the
    trace there (:class:`SizeProbe`) when ``number`` is what the probe is for. Whether the trace is a probe's
    (``False``: it is not, and nothing happened)."""
    plan = _PLAN.get()
    if plan is None or plan.probe is None:
        return False
    while hasattr(size, "primal"):  # (under jax.grad: the size is the primal's, which leaves it)
        size = size.primal
    plan.probed[number] = size
    if plan.probe == number:
        raise SizeProbe(plan.probed)
    return True


def learned_size(number: int, kind: str = "size") -> Optional[int]:
    """The size ``stack()`` of planned array ``number`` returned last time (``None``: not yet known), or
    the plan's other entry of ``kind`` for it."""
    plan = _PLAN.get()
    return None if plan is None else plan.sizes.get((kind, number))


def rows_for(bound: Optional[int], unplanned: bool = False) -> tuple[int, Optional[int]]:
    """``(rows, loop)`` for the stacks of a loop bounded by ``bound`` (``None``: unbounded):
    ``loop`` is its number in the plan, or ``None`` when its rows cannot run out (no plan, or
    the bound fits). ``unplanned``: an unbounded loop outside a plan gets :data:`INITIAL_ROWS` rows,
    and ``loop`` :data:`UNPLANNED` (running past them is an error), where it would be refused."""
    planned = planned_rows()
    if planned is None:
        if bound is None:
            if unplanned:
                return INITIAL_ROWS, UNPLANNED
            Error.LOOP_NEEDS_BOUND.raise_()
        return bound, None
    rows, loop = planned
    if bound is not None and bound <= rows:
        return bound, None
    return rows, loop


def grown(sizes: dict[Key, int], number: int, needed: int) -> dict[Key, int]:
    """The plan with room for ``needed`` rows in ``number`` (doubling: something that grows
    step by step recompiles a logarithmic number of times)."""
    have = sizes.get(("rows", number), INITIAL_ROWS)
    while have < needed:
        have *= 2
    return {**sizes, ("rows", number): have}


def sized(sizes: dict[Key, int], number: int, size: int) -> dict[Key, int]:
    """The plan with ``stack()`` of array ``number`` returning ``size`` rows."""
    return {**sizes, ("size", number): size}


def alike(sizes: dict[Key, int], learned: set[Key], unsized: Iterable[int]) -> dict[Key, int]:
    """The plan with the one size just ``learned`` as the first guess for each array of
    ``unsized`` (the arrays whose ``stack()`` the trace had no size for): the arrays a loop writes
    usually share its length, so one rerun learns them all, where each would take a rerun of its
    own; a wrong guess is reported and learned as any size is."""
    if len(learned) != 1:
        return sizes
    (key,) = learned
    return {**{("size", k): sizes[key] for k in unsized}, **sizes}
