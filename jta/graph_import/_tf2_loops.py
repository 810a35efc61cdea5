"""TF2's functional ``While``/``StatelessWhile`` as ``lax.scan``, or as ``jta.while_loop``.

``jax.grad`` reverses a ``lax.scan`` but not a ``lax.while_loop``, and a TensorList pushed in a loop
needs a buffer sized before the loop. So the trip count is found first, by a *probe*: cond and body
run on the static part of the carry only (loop counters, bounds, shapes; everything that depends
on the inputs' values is unknown), step after step until the condition is static ``False``:

* every step's condition static: the trip count is exact, and the loop is a ``lax.scan`` of that
  many steps (afterwards the static part of the carry and the lists' lengths are known again);
* some steps' conditions unknown: the probe's count is a *bound* (``maximum_iterations``, the
  ``n`` of an autograph ``for i in tf.range(n)`` with ``break``, which passes
  ``maximum_iterations=-1`` and keeps the bound in the condition only): a ``lax.scan`` of that many
  steps in which a step whose condition is false leaves the carry as it is (a ``lax.cond``), or those
  steps unrolled where a size the body learns differed between steps in a run and the bound is short;
* no bound: ``jta.while_loop``, which ``jax.grad`` reverses too; its stacks and the lists it grows
  are sized by ``jta.checked``'s plan, outside it for 256 steps (a run past them fails from compiled
  code, naming ``jta.checked``).

Eagerly (concrete inputs, outside ``jit`` and ``grad``) a loop without an exact trip count runs
step by step in Python, so lists keep static lengths and stacks have TensorFlow's shapes. A loop of
at most :data:`MAX_UNROLL` steps that cannot be a scan (a value of its carry must stay static inside,
as an inner loop's trip count; a loop variable changes shape) is unrolled the same way.

Before a scan, one step is traced abstractly (``jax.eval_shape``) to learn what the body does to
each list of the carry: its element shape (an ``EmptyTensorList`` learns it from its first push)
and how much it grows per step; each list's buffer then gets its capacity.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .. import errors
from .._core import capacities
from ..loops import unbounded_while_loop
from . import _growing_loops
from ._functions import UNKNOWN, Body, Bounded, Evaluator, Var, concrete
from ._growing_loops import MAX_STEPS as MAX_UNROLL
from ._growing_loops import ShapeChanges
from ._list_value import value_key
from ._lists import VARIANT, AtMost, TList, materialize, rows, sized_by_plan
from ._messages import GraphError
from ._nodes import Node
from ._ops import is_static
from ._random_kernels import key_of

__all__ = ["run", "PROBE_LIMIT"]

PROBE_LIMIT = 10_000  # probe steps before a loop counts as unbounded


def _is_const(v: Any) -> bool:
    return is_static(v) or isinstance(v, Var)


def _trips(ev: Evaluator, node: Node, cond: Body, body: Body, args: list[Any]) -> tuple[Optional[int], bool, list[Any]]:
    """``(steps, exact, final probe state)``: the trip count (exact) or a bound on it, None if unbounded."""
    probe = Evaluator(ev.lib, ev.params, run, probe=True, pad_stacks=ev.pad_stacks, handles=ev.handles)
    state = [a if _is_const(a) else Bounded(ev.bounds[id(a)][1]) if id(a) in ev.bounds else UNKNOWN
             for a in args]
    exact, steps = True, 0
    watched, seen, recent = _condition_reads(cond, body), set(), []
    while steps <= PROBE_LIMIT:
        c = probe.call(cond, state)[0]
        if c is UNKNOWN:
            exact = False
            # the values the condition depends on (through the steps too) as before: so are the conditions
            # of all the steps to come, unknown (a condition on the data only: v > tolerance); no bound
            key = _probe_key([state[k] for k in watched])
            if key is not None and key in seen:
                return None, False, state
            seen.add(key)
            recent = [*recent[-2:], state]
            if len(recent) == 3 and _unknown_at_the_limit(probe, cond, watched, recent, PROBE_LIMIT - steps):
                return None, False, state
        elif not bool(np.asarray(c)):
            return steps, exact, state
        state = probe.call(body, state)
        steps += 1
    return None, False, state


def _unknown_at_the_limit(probe: Evaluator, cond: Body, watched: list[int], recent: list[list[Any]],
                          ahead: int) -> bool:
    """Whether the condition is still unknown ``ahead`` steps on, where the values it depends on move as
    they did in the ``recent`` three steps: each the same, or an integer counter stepping by a constant
    (``for i in tf.range(n)`` of an unknown ``n``: ``i < n``). Then the loop counts as unbounded at once,
    rather than after the probe's every step (a condition unknown at the limit may have been false in
    between only if it is not monotone in its counters: the loop is then unbounded to jta, which is
    safe, only not as tight)."""
    ahead_state = list(recent[-1])
    moved = False
    for k in watched:
        a, b, c = (state[k] for state in recent)
        first = _probe_key([a])
        if first is not None and first == _probe_key([b]) == _probe_key([c]):
            continue
        if not all(is_static(v) and np.ndim(v) == 0 and np.issubdtype(np.asarray(v).dtype, np.integer)
                   for v in (a, b, c)):
            return False
        step = int(b) - int(a)
        if int(c) - int(b) != step:
            return False
        ahead_state[k] = (np.asarray(c) + np.asarray(step * ahead)).astype(np.asarray(c).dtype)
        moved = True
    return moved and probe.call(cond, ahead_state)[0] is UNKNOWN


def _condition_reads(cond: Body, body: Body) -> list[int]:
    """The loop variables the condition depends on, directly or through the body's steps."""
    watched: set[int] = set()
    more = cond.reads([0])
    while more - watched:
        watched |= more
        more = body.reads(sorted(watched))
    return sorted(watched)


def _probe_key(values: list[Any]) -> Optional[tuple[Any, ...]]:
    """The probe's values as a key (None where one is of a kind it does not compare)."""
    key: list[Any] = []
    for v in values:
        if v is UNKNOWN or isinstance(v, Bounded):
            key.append(v)
        elif isinstance(v, Var):
            key.append(("var", id(v)))
        elif isinstance(v, (np.ndarray, np.generic, int, float, bool)):
            key.append(value_key(v))
        else:
            return None
    return tuple(key)


def run(ev: Evaluator, node: Node, args: list[Any]) -> Optional[list[Any]]:
    """A ``While``/``StatelessWhile`` node's outputs (None: unknown to a probe)."""
    cond, body = ev.lib.body(node.attr("cond")), ev.lib.body(node.attr("body"))
    args = [concrete(a) for a in args]
    if ev.probe and not all(_is_const(a) for a in args):
        return None
    steps, exact, final = _trips(ev, node, cond, body, args)
    assigned = _assigned(ev, node, args)
    if steps is not None and not any(v is UNKNOWN for v in final) and not assigned and not _prints(ev, cond, body):
        return final  # every value static (shape arithmetic, or the probe ran it all): computed already
    carried, ev.carried = ev.carried, ev.carried | set(assigned)
    try:
        return _run(ev, node, cond, body, args, steps, exact, final, assigned)
    finally:
        ev.carried = carried


def _prints(ev: Evaluator, *bodies: Body) -> bool:
    """Whether the loop prints (``tf.print``, which its probe skips): then it runs, even where the probe
    computed it all."""
    return any("PrintV2" in ev.lib.ops(b.name) for b in bodies)


def _assigned(ev: Evaluator, node: Node, args: list[Any]) -> list[str]:
    """The variables the loop assigns and the random generators it steps, which it carries (no variable
    where an assignment's handle is not a loop variable: the assignment is then refused)."""
    names = (node.attr("cond"), node.attr("body"))
    kernels = {key_of(ev.sites, k) for n in names for k in ev.lib.kernels(n)} & set(ev.params)  # (generators)
    found = [ev.lib.assigned(n) for n in names]
    handles = [args[k] for f in found if f is not None for k in f]
    if None in found or not all(isinstance(h, Var) for h in handles):
        return sorted(kernels)
    return sorted(kernels | {h.name for h in handles})


def _run(ev: Evaluator, node: Node, cond: Body, body: Body, args: list[Any], steps: Optional[int], exact: bool,
         final: list[Any], assigned: list[str]) -> list[Any]:
    if exact and steps == 0:  # the body never runs (tracing it for a scan of no steps could fail: a push
        return args           # onto a buffer of no rows)
    if not exact and _concrete(args):
        return _python_loop(ev, cond, body, args)
    short = exact and steps is not None and steps <= MAX_UNROLL
    if short and not assigned and all(_concrete([a]) if isinstance(a, TList) else is_static(a) for a in args):
        # a loop of constants (tf.norm's map_fn over its axes): run now, so that its values are known while
        # tracing (a ListDiff of them has a static shape)
        with jax.ensure_compile_time_eval():
            return _python_loop(ev, cond, body, args, steps)
    # A short bounded loop is unrolled where a run saw a size of its body differ between steps (a scan of
    # the same size at every step compiles once); not one that pushes, as a tape's forward loop pushes what
    # its gradient needs: rows of other shapes at each step, which no buffer holds
    guarded = not exact and steps is not None and steps <= MAX_UNROLL and "TensorListPushBack" not in \
        ev.lib.ops(body.name)
    ev.unrolls.append(short)
    try:
        try:
            with capacities.learning_refused(True if short else "varying" if guarded else False):
                return _scan(ev, node, cond, body, args, steps, exact, final, assigned)
        except capacities.LearnsPerStep:
            if not guarded:
                raise
        # A short bounded loop whose body learns a size that differed between steps (an inner loop's stack,
        # a mask's rows): its steps unrolled, each under its condition, each learning its own
        return _scan(ev, node, cond, body, args, steps, exact, final, assigned, unrolled=True)
    except (errors.UnimplementedError, errors.InvalidArgumentError, ShapeChanges) as failure:
        if not (short or _concrete(args)):
            if not isinstance(failure, ShapeChanges):
                raise
            if exact or assigned:  # (a static trip count past MAX_UNROLL; variables the steps assign)
                _growing_loops.refuse(node, failure, "" if exact else (
                    " (and its steps assign variables, which a loop unrolled to a learned count does not carry)"))
            return _growing_loops.run_learned(ev, node, cond, body, args, steps, failure)
        # The body needs static what its step decides: a static value of the carry (an inner loop's trip
        # count, a list's length) or a size its data decides (a Where's count, which jta.checked learns
        # and which may differ between steps). A short loop is unrolled, so each step has its own; an
        # eager call runs any loop step by step, as TensorFlow runs it.
        return _python_loop(ev, cond, body, args, steps if exact else None)
    finally:
        ev.unrolls.pop()


def _scan(ev: Evaluator, node: Node, cond: Body, body: Body, args: list[Any], steps: Optional[int], exact: bool,
          final: list[Any], assigned: list[str], unrolled: bool = False) -> list[Any]:
    """The loop as a ``lax.scan`` (``steps`` exact or a bound) or, without a bound, ``jta.while_loop``; the
    variables ``assigned`` in it are loop variables too. ``unrolled``: a bounded loop's steps one after
    the other, each traced at its own site (:func:`capacities.at_site`), in place of the scan."""
    start = {name: jnp.asarray(ev.params[name]) for name in assigned}
    fixed = [k for k, a in enumerate(args) if isinstance(a, Var) or body.passthrough(k) == k]
    growth, shapes, consts, room, least = _discover(ev, body, args, fixed)
    capacity = steps if steps is not None else 0
    # without a bound, under jta.checked: the lists the loop grows get one number of the plan (its steps),
    # keyed by the loop's call path (the same at every step of an enclosing unrolled loop)
    plan = capacities.planned_rows(key=tuple(ev.sites)) if steps is None and capacities.active() and any(
        isinstance(args[k], TList) and growth.get(k) != 0 for k in growth) else None
    carry = {}
    for k, a in enumerate(args):
        if k in fixed:
            continue
        if isinstance(a, TList):
            c = _prepare(node, a, growth[k], shapes[k], capacity, steps is None, room.get(k, 1), _nesting(ev),
                         plan, least.get(k, 0))
            carry[k] = TList(c.items, c.length, c.dtype, c.shape, c.parts, consts[k],  # a copy: _consts edits it
                             limit=c.limit, plan=c.plan)
        else:
            carry[k] = jnp.asarray(a)
    variants = [k for k in carry if isinstance(args[k], TList) and args[k].dtype == VARIANT and args[k].static]
    if variants:  # their elements (lists, optionals) as the scan carries them: from a step on that carry
        _variant_templates(ev, node, body, args, carry, variants, capacity, steps is None, growth, plan, consts)
    if any(c is not None for c in consts.values()):
        _consts(ev, body, args, carry)
    ev.params.update(start)  # (the abstract steps above assigned their own traces' values)
    slots = {name: -1 - k for k, name in enumerate(assigned)}  # (the variables' keys in the carry: negative)
    carry.update({slots[name]: value for name, value in start.items()})

    def merge(c: dict[int, Any]) -> list[Any]:
        ev.params.update({name: c[slot] for name, slot in slots.items()})
        return [c[k] if k in c else args[k] for k in range(len(args))]

    def step_body(c: dict[int, Any]) -> dict[int, Any]:
        out = _in_carry(ev, body, merge(c))
        new = {k: _like(node, out[k], c[k]) for k in c if k >= 0}
        return {**new, **{slot: _like(node, ev.params[name], c[slot]) for name, slot in slots.items()}}

    def truth(c: dict[int, Any]) -> Any:
        return jnp.asarray(_in_carry(ev, cond, merge(c))[0]).astype(bool).reshape(())

    if steps is None:
        out = unbounded_while_loop(truth, step_body, carry)
    elif exact:
        out, _ = jax.lax.scan(lambda c, _: (step_body(c), None), carry, None, length=steps)
    else:
        def guarded(c: dict[int, Any]) -> dict[int, Any]:  # a step past the loop's end leaves the carry
            # (a new function each time: lax.cond would reuse the first trace of one, and each step must
            # ask for its own sizes)
            return jax.lax.cond(truth(c), lambda c: step_body(c), lambda c: c, c)

        if unrolled:
            out = carry
            for k in range(steps):
                with capacities.at_site(k):
                    out = guarded(out)
        else:
            out, _ = jax.lax.scan(lambda c, _: (guarded(c), None), carry, None, length=steps)
    result = merge(out)  # (and the variables' values after the loop)
    ev.assigned.update(assigned)
    if not exact and steps is not None:  # a counter of a bounded loop is at most its probe's final value
        for k, v in enumerate(final):
            if k in out and is_static(v) and np.ndim(v) == 0 and np.issubdtype(np.asarray(v).dtype, np.integer) \
                    and is_static(args[k]) and int(v) >= int(args[k]):
                ev.bounds[id(result[k])] = (result[k], int(v))
    for k, r in enumerate(result):  # an eager call: a length the loop computed is concrete, so static again
        if isinstance(r, TList) and isinstance(r.length, jax.Array) and not isinstance(r.length, Tracer):
            result[k] = TList(r.items, int(r.length), r.dtype, r.shape, r.parts, r.const, r.rows_hint, r.limit)
    if exact:  # the static part of the carry is known after the loop, and so are the lists' lengths
        for k, v in enumerate(final):
            if k not in fixed and is_static(v):
                result[k] = v
            elif isinstance(result[k], TList) and isinstance(args[k], TList) and args[k].static and \
                    growth.get(k) is not None:
                r = result[k]
                result[k] = TList(r.items, args[k].length + steps * growth[k], r.dtype, r.shape, r.parts, r.const,
                                  limit=r.limit)
    return result


def _in_carry(ev: Evaluator, body: Body, args: list[Any]) -> list[Any]:
    """``body`` on a loop's prepared carry: the lists of a run-time length there have buffers this loop
    sized for all its steps, so the loops inside must not grow them (:func:`_prepare`)."""
    ev.carry_depth += 1
    try:
        return ev.call(body, args)
    finally:
        ev.carry_depth -= 1


def _concrete(args: list[Any]) -> bool:
    """No value of the carry is traced: an eager call, whose loop can run step by step."""
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(args))


def _python_loop(ev: Evaluator, cond: Body, body: Body, args: list[Any], steps: Optional[int] = None) -> list[Any]:
    """The loop step by step (``steps``: its exact trip count, which the probe found where the condition
    traced here may not be static: ``i < 1 & s < c`` after one step, with ``s`` of the data)."""
    state, step = args, 0
    while True:
        with capacities.at_site(step):  # (each step asks for its own sizes: jta.checked learns each)
            going = _growing_loops.condition(ev, cond, state)
            if not (step < steps if steps is not None and isinstance(going, Tracer) else going):
                return state
            state = [concrete(v) for v in ev.call(body, state)]
        step += 1


def _discover(ev: Evaluator, body: Body, args: list[Any], fixed: list[int]) -> tuple[dict[int, Any], ...]:
    """Per list of the carry: its growth per step (None: not static), its element shape, its
    constant (:class:`TList`'s ``const``; checked again on the scan's carry by :func:`_consts`) and, where
    the growth is not static, a bound on it (the rows an inner bounded loop sized), from one
    abstract step of the body where the static values stay static (a write at the loop counter has a
    static index)."""
    lists = [k for k, a in enumerate(args) if isinstance(a, TList) and k not in fixed]
    if not lists:
        return {}, {}, {}, {}, {}

    untouched: set[int] = set()  # the lists the step passes on as they came (no write, no growth)

    def one(dyn: dict[int, Any]) -> list[Any]:
        ins = [dyn.get(k, a) for k, a in enumerate(args)]
        out = ev.call(body, ins)
        untouched.update(k for k in lists if out[k].items is ins[k].items and out[k].parts is ins[k].parts
                         and out[k].length is ins[k].length)
        return [out[k] for k in lists]

    outs = jax.eval_shape(one, {k: a for k, a in enumerate(args) if not _is_const(a)})
    growth, shapes, consts, room, least = {}, {}, {}, {}, {}
    for k, out in zip(lists, outs, strict=True):
        a = args[k]
        growth[k] = out.length - a.length if isinstance(out.length, int) and a.static else None
        if out.items is not None and a.dtype != VARIANT:
            # the rows the step's buffer has: a sum with a longer list (a tape's AddN of gradient lists, one
            # of them a stack's of the length jta.checked guessed) widens it, so the carry starts as wide
            least[k] = rows(out.items)
        if growth[k] is None and a.static and out.items is not None and a.dtype != VARIANT:
            # an inner loop whose trip count is the data's (a bound) sized the buffer for its bound: the
            # growth per step is at most that many rows (not one)
            room[k] = max(rows(out.items) - a.length, 1)
        if a.dtype == VARIANT:  # a list of lists: its buffer's abstract value is the template
            shapes[k] = out.items if out.items is not None or not out.parts else jax.tree_util.tree_map(
                lambda e: jax.ShapeDtypeStruct((1, *e.shape), e.dtype), out.parts[0])
        elif out.items is not None:
            shapes[k] = tuple(out.items.shape[1:])
        else:  # pushed one by one (a static length): the last element's shape
            shapes[k] = next((tuple(p.shape) for p in reversed(out.parts or ()) if p is not None), None)
        consts[k] = out.const
    _unseen_growth(ev, body, args, fixed, lists, untouched, growth, room, shapes)
    return growth, shapes, consts, room, least


def _unseen_growth(ev: Evaluator, body: Body, args: list[Any], fixed: list[int], lists: list[int],
                   untouched: set[int], growth: dict[int, Any], room: dict[int, int], shapes: dict[int, Any]
                   ) -> None:
    """The lists that step did not touch but a later one may grow, or grew but a later one may not: a write
    under a branch whose predicate is static in the first step only (``if i % 2 == 0`` of a counter starting
    at 0, ``if i < 1``). One more abstract step,
    the static values the loop changes traced and the lists of a traced length (as a loop carries them),
    shows each list a step may write; such a list's growth is not static (room: one element per step,
    more of which make ``jta.checked`` grow the plan's rows)."""
    still = [k for k in lists if k in untouched and growth[k] == 0 and args[k].dtype != VARIANT and args[k].static]
    # and the lists the first step grew under such a branch (``if i < 1``): they do not grow in every step
    grown = [k for k in lists if growth[k] not in (0, None) and args[k].dtype != VARIANT and args[k].static]
    varying = [k for k, a in enumerate(args) if k not in fixed and not isinstance(a, TList) and is_static(a)]
    if not (still or grown) or not varying:
        return
    written: dict[int, Any] = {}  # list -> the element shape written

    def one(dyn: dict[int, Any]) -> None:
        ins = [dyn.get(k, a) for k, a in enumerate(args)]
        ev.switched = set()
        try:
            out = ev.call(body, ins)
        finally:
            switched, ev.switched = ev.switched, None
        for k in still:
            if out[k].length is not ins[k].length:  # grown (a write that does not grow keeps the length)
                written[k] = shapes[k] if out[k].items is None else tuple(out[k].items.shape[1:])
        written.update({k: shapes[k] for k in grown if id(out[k]) in switched})

    dyn = {k: a for k, a in enumerate(args) if k in varying or not _is_const(a)}
    dyn.update({k: args[k].traced() for k in lists if args[k].dtype != VARIANT and args[k].static})
    try:
        jax.eval_shape(one, dyn)
    except Exception:  # noqa: BLE001 -- a probe only: where the step needs these values static, it cannot tell
        return
    for k, shape in written.items():
        growth[k], room[k], shapes[k] = None, 1, shape


def _variant_templates(ev: Evaluator, node: Node, body: Body, args: list[Any], carry: dict[int, Any],
                       variants: list[int], steps: int, unbounded: bool, growth: dict[int, Any],
                       plan: Optional[tuple[int, int]], consts: dict[int, Any]) -> None:
    """Size the lists of lists (or of optionals) of the carry from one abstract step on the carry
    (where the lists they receive are already buffers with traced lengths), not on the arguments."""
    def one(c: dict[int, Any]) -> dict[int, Any]:
        out = _in_carry(ev, body, [c[k] if k in c else a for k, a in enumerate(args)])
        return {k: out[k] for k in variants}

    outs = jax.eval_shape(one, {**carry, **{k: args[k] for k in variants}})
    for k in variants:
        out = outs[k]
        template = out.items if out.items is not None or not out.parts else jax.tree_util.tree_map(
            lambda e: jax.ShapeDtypeStruct((1, *e.shape), e.dtype), out.parts[-1])
        c = _prepare(node, args[k], growth[k], template, steps, unbounded, nested=_nesting(ev), plan=plan)
        carry[k] = TList(c.items, c.length, c.dtype, c.shape, c.parts, consts.get(k), limit=c.limit, plan=c.plan)


def _consts(ev: Evaluator, body: Body, args: list[Any], carry: dict[int, Any]) -> None:
    """Keep a list's ``const`` only where one step of the scan's body (its carry traced) keeps it."""
    for attempt in range(3):
        def one(c: dict[int, Any]) -> dict[int, Any]:
            out = _in_carry(ev, body, [c[k] if k in c else a for k, a in enumerate(args)])
            return {k: out[k] for k in c}

        out = jax.eval_shape(one, carry)
        changed = False
        for k, v in carry.items():
            if isinstance(v, TList) and v.const is not None and out[k].const != v.const:
                # a bound on the elements (a tape's run-time counts) grows to the largest a step pushes (once:
                # a bound still growing after that is dropped)
                grown = attempt == 0 and isinstance(v.const, AtMost) and isinstance(out[k].const, AtMost)
                v.const, changed = out[k].const if grown else None, True
        if not changed:
            return


def _nesting(ev: Evaluator) -> Optional[bool]:
    """Whether the loop runs in another loop's body, on its carry: ``None`` if not, else whether that
    loop can be unrolled (a short static trip count)."""
    return (len(ev.unrolls) > 1 and ev.unrolls[-2]) if ev.carry_depth > 0 else None


def _prepare(node: Node, lst: TList, growth: Optional[int], shape: Any, steps: int, unbounded: bool,
             room: int = 1, nested: Optional[bool] = None, plan: Optional[tuple[int, int]] = None,
             least: int = 0) -> TList:
    """A list of the carry with its buffer sized for the loop (``room``: the growth per step where it
    is not static; ``nested``: the loop runs inside another loop's body, on its carry (whether that loop
    can be unrolled; None: it does not); ``plan``: the
    ``(steps, number)`` jta.checked's plan gives a loop without a bound; ``least``: the rows one step
    gives the buffer, which the carry's must have too)."""
    if growth == 0 and shape is None and lst.items is None:
        return TList(lst.items, lst.length, lst.dtype, lst.shape, lst.parts, limit=lst.limit)  # the loop does not touch it
    if nested is not None and not lst.static and lst.items is not None and lst.dtype != VARIANT:
        # a run-time length inside an enclosing loop's body: the enclosing loop sized the buffer for all
        # its steps (this loop's included); growing it here would change the enclosing loop's carry (a
        # write past it fails from compiled code, or makes jta.checked grow the enclosing loop's plan).
        # Where this loop has no bound, the enclosing loop's first abstract step did not see how much it
        # grows: an enclosing loop that can be unrolled is (each step then sizes its own)
        if nested and unbounded and growth != 0:
            raise capacities.LearnsPerStep(f"{node.name}: a loop without a bound grows a list of the carry")
        return lst
    if unbounded and growth != 0:
        if plan is not None:
            return sized_by_plan(node, lst, shape, plan, room if growth is None else growth)
        # outside jta.checked: room for as many steps as its plans start with; a write past them fails
        # from compiled code (LIST_BEYOND_CAPACITY, naming jta.checked), never clamped
        steps = capacities.INITIAL_ROWS
    have = lst.length if lst.static else rows(lst.items)
    capacity = max(have + steps * (room if growth is None else max(growth, 0)), least)
    lst = materialize(lst, node, capacity, shape)
    return lst if growth == 0 else lst.traced()


def _like(node: Node, new: Any, old: Any) -> Any:
    """A body output shaped and typed as the carry it replaces (``lax.scan`` needs the same types)."""
    if isinstance(old, TList):
        if not isinstance(new, TList):
            GraphError.TF2_LOOP.raise_(node=node.name, op=node.op, what="the body turns a TensorList into a tensor.")
        if new.items is not None and old.items is not None and rows(new.items) < rows(old.items) and new.parts is None:
            # a list the body makes afresh (a TensorArray made again at each step, unstacked from the carry's
            # stack): held in the carry's buffer, as a loop's lists are
            new = materialize(new, node, rows(old.items), old.shape)
        if (new.rows_hint, new.limit, new.plan) != (old.rows_hint, old.limit, old.plan):  # static facts the carry keeps
            new = TList(new.items, new.length, new.dtype, new.shape, new.parts, new.const, old.rows_hint, old.limit,
                        old.plan)
        if jax.tree_util.tree_structure(new) != jax.tree_util.tree_structure(old):
            new = new.traced() if not isinstance(old.length, int) and isinstance(new.length, int) else new
        if jax.tree_util.tree_structure(new) != jax.tree_util.tree_structure(old):
            GraphError.TF2_LOOP.raise_(node=node.name, op=node.op, what=(
                f"the body changes the structure of a TensorList of its carry ({old!r} becomes {new!r})."))
        return jax.tree_util.tree_map(lambda n, o: jnp.asarray(n).astype(o.dtype), new, old)
    value = jnp.asarray(new).astype(old.dtype)
    if value.shape != old.shape:
        raise ShapeChanges(old.shape, value.shape)
    return value
