"""Checks that cost nothing in a loop step: a scan's error bookkeeping, decided after the loop.

A TensorArray op in a loop body updates the array's error record (``jta_record``) and its
slot flags (``jta_slot``) and reports records (``jta_check``). When the indices of those ops
come from the scan's inputs, its counter or values fixed before the loop, nothing in them
depends on the step's other work, so :func:`plan` takes them out of the body, and
:func:`decide` computes them for all steps at once after the loop: the indices by ``vmap``
over the steps, the slot flags by :func:`~jta._records.slots.replay`, and each record by one
reduction over the steps that carries the first error's entry along (:func:`first_where`). The
result is exactly the record the loop would have threaded: the first error in program order (step
by step, and in the body's order within a step).

When anything in the body reads the bookkeeping, or a report cannot move (a check inside a
``cond``, a record chosen by a select, an index that depends on the carry), :func:`plan`
returns ``None`` and the loop is threaded step by step, as before: moving is an optimisation
that never changes a result.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core

from .._records.primitives import check_p, first_error, packed, record_p
from .._records.slots import replay, slot_p
from . import known


@dataclasses.dataclass(frozen=True)
class Lineage:
    """A record as the body computes it: its ``root`` (carry ``k``'s record as the step
    received it, or a value fixed for the step) updated by ``events`` (``jta_record`` and
    ``jta_slot`` equations), in order."""

    root: Union[int, core.Atom]
    events: tuple[core.JaxprEqn, ...]


@dataclasses.dataclass(frozen=True)
class Steps:
    """What :func:`per_step` computes for every step: the values ``needed``, from the body's
    equations ``slice`` and the ``counters`` (also what ``scan_rewrite`` computes its indices by)."""

    counters: dict[int, core.Atom]  # carry -> its increment per step
    needed: tuple[core.Var, ...]  # the per-step values the decision reads
    slice: tuple[core.JaxprEqn, ...]  # the body's equations that compute them


@dataclasses.dataclass(frozen=True)
class Plan(Steps):
    """What moves out of a scan body (see :func:`plan`)."""

    skip: frozenset[int]  # ``id`` of the body's equations that no longer run in the loop
    records: dict[int, Lineage]  # record carry -> how the body updates it
    flags: dict[int, tuple[core.JaxprEqn, ...]]  # slot-flags carry -> its ``jta_slot`` ops
    reports: tuple[tuple[core.JaxprEqn, Lineage], ...]  # the body's checks, in order

    @property
    def moved(self) -> frozenset[int]:
        """The carries that the loop no longer carries."""
        return frozenset(self.records) | frozenset(self.flags)


def lineage(v: core.Atom, producers: dict[core.Var, core.JaxprEqn], carry: dict[core.Var, int]) -> Lineage:
    """How the body computes the record ``v``: back through ``jta_record`` and ``jta_slot``
    updates (each keeps an error already recorded) to a carry of ``carry`` (the root is its
    number) or to whatever else made it."""
    events = []
    while not isinstance(v, core.Literal) and v not in carry:
        eqn = producers.get(v)
        if eqn is not None and eqn.primitive is record_p:
            events.append(eqn)
            v = eqn.invars[0]
        elif eqn is not None and eqn.primitive is slot_p and v is eqn.outvars[1]:
            events.append(eqn)
            v = eqn.invars[1]
        else:
            break
    root = carry[v] if not isinstance(v, core.Literal) and v in carry else v
    return Lineage(root, tuple(reversed(events)))


def _flags(v: core.Atom, producers: dict[core.Var, core.JaxprEqn], carry: dict[core.Var, int]
           ) -> tuple[Optional[int], tuple[core.JaxprEqn, ...]]:
    """Slot bits as the body computes them: the carry they start from (``None``: none) and the
    ``jta_slot`` ops that update them, in order."""
    ops = []
    while not isinstance(v, core.Literal) and v not in carry:
        eqn = producers.get(v)
        if eqn is None or eqn.primitive is not slot_p or v is not eqn.outvars[0]:
            return None, ()
        ops.append(eqn)
        v = eqn.invars[0]
    return (None if isinstance(v, core.Literal) else carry[v]), tuple(reversed(ops))


def _dtype(v: core.Atom) -> Any:
    aval: Any = v.aval  # (a ShapedArray: the body's variables are arrays)
    return aval.dtype


def _is_ranked(v: core.Atom, ndim: int) -> bool:
    return getattr(v.aval, "ndim", None) == ndim


def plan(closed: core.ClosedJaxpr, num_consts: int, num_carry: int) -> Optional[Plan]:
    """What of a scan body (``closed``: consts, carries, scanned inputs) moves out of the loop,
    or ``None`` when its reports must stay in it."""
    body = closed.jaxpr
    reporting = [eqn for eqn in body.eqns if eqn.effects]
    checks = [eqn for eqn in reporting if eqn.primitive is check_p]
    if not checks or len(checks) != len(reporting):  # another effect may depend on a report's order
        return None
    carry_in = list(body.invars[num_consts:num_consts + num_carry])
    carry_out = list(body.outvars[:num_carry])
    carry = {v: k for k, v in enumerate(carry_in)}
    producers = {v: eqn for eqn in body.eqns for v in eqn.outvars}

    reports = tuple((eqn, lineage(eqn.invars[0], producers, carry)) for eqn in checks)
    records = {lin.root: lineage(carry_out[lin.root], producers, carry)
               for _, lin in reports if isinstance(lin.root, int)}
    # Every update reached from a report belongs to a record carried through the loop, whose
    # record the body returns updated from the one it received (not another carry's: a swap).
    events = {id(e): e for _, lin in reports for e in lin.events}
    if any(e.primitive is record_p and e.params["learns"] for e in events.values()):
        return None  # a record that keeps its largest index, which the steps in order compute
    for k, lin in list(records.items()):
        if lin.root != k:
            return None
        events.update((id(e), e) for e in lin.events)
    flags: dict[int, tuple[core.JaxprEqn, ...]] = {}
    for eqn in [e for e in events.values() if e.primitive is slot_p]:
        k, _ = _flags(eqn.invars[0], producers, carry)
        if k is None:
            return None
        if k not in flags:
            root, chain = _flags(carry_out[k], producers, carry)
            if root != k:  # the bits the body returns are not its carry's, updated
                return None
            flags[k] = chain
    on_chains = {id(e) for chain in flags.values() for e in chain}
    slot_events = {i for i, e in events.items() if e.primitive is slot_p}
    if slot_events != on_chains:  # an op on bits that no record follows (or the reverse)
        return None
    moved = set(records) | set(flags)
    if len(moved) < len(records) + len(flags):  # one carry both a record and bits
        return None
    if any(not _is_ranked(carry_in[k], 1) for k in moved):  # batched by vmap: left in the loop
        return None

    skip = set(events) | {id(eqn) for eqn in checks}
    owned = {v for eqn in body.eqns if id(eqn) in skip for v in eqn.outvars} | {carry_in[k] for k in moved}
    for eqn in body.eqns:
        if id(eqn) not in skip and any(v in owned for v in eqn.invars if not isinstance(v, core.Literal)):
            return None  # the body reads the bookkeeping
    for k, v in enumerate(body.outvars):
        if not isinstance(v, core.Literal) and v in owned and not (k < num_carry and k in moved):
            return None

    counters = find_counters(body, carry_in, carry_out, producers, num_consts, moved)
    fixed = fixed_values(body, num_consts, num_carry, counters, frozenset(skip), moved)

    needed: list[core.Atom] = []
    for eqn in events.values():
        needed.extend(eqn.invars[1:] if eqn.primitive is record_p else eqn.invars[2:])
    for eqn, lin in reports:
        needed.append(eqn.invars[1])
        if not isinstance(lin.root, int):
            needed.append(lin.root)
    needed_vars = list(dict.fromkeys(v for v in needed if not isinstance(v, core.Literal)))
    if any(v not in fixed for v in needed_vars):
        return None  # depends on the carry
    for eqn, lin in reports:
        if not _is_ranked(eqn.invars[0], 1) or (not isinstance(lin.root, int) and not _is_ranked(lin.root, 1)):
            return None
    return Plan(counters, tuple(needed_vars), slice_of(body, needed_vars, producers),
                skip=frozenset(skip), records=records, flags=flags, reports=reports)


def fixed_values(body: core.Jaxpr, num_consts: int, num_carry: int, counters: dict[int, core.Atom],
                 skip: frozenset[int], moved: Any = frozenset()) -> set[core.Var]:
    """The body's values fixed for a step: computed from the consts, the scanned inputs, the
    counters and the carries the body returns unchanged (``moved`` aside), by equations without
    effects (``skip``: ``id`` of equations left out)."""
    carry_in = body.invars[num_consts:num_consts + num_carry]
    carry_out = body.outvars[:num_carry]
    fixed = set(body.invars[:num_consts]) | set(body.invars[num_consts + num_carry:])
    fixed |= {carry_in[k] for k in counters}
    fixed |= {v for k, v in enumerate(carry_in) if carry_out[k] is v and k not in moved}
    for eqn in body.eqns:
        if id(eqn) not in skip and not eqn.effects and all(
                isinstance(v, core.Literal) or v in fixed for v in eqn.invars):
            fixed.update(eqn.outvars)
    return fixed


def find_counters(body: core.Jaxpr, carry_in: list[core.Var], carry_out: list[Any],
              producers: dict[core.Var, core.JaxprEqn], num_consts: int, moved: set[int]) -> dict[int, core.Atom]:
    """The carries that count: ``c + d`` for an integer scalar ``d`` fixed for the loop."""
    consts = set(body.invars[:num_consts])
    found = {}
    for k, out in enumerate(carry_out):
        eqn = producers.get(out) if not isinstance(out, core.Literal) else None
        v = carry_in[k]
        if (k in moved or eqn is None or eqn.primitive is not lax.add_p or not _is_ranked(v, 0)
                or not jnp.issubdtype(_dtype(v), jnp.integer)):
            continue
        a, b = eqn.invars
        step = b if a is v else a if b is v else None
        if step is not None and (isinstance(step, core.Literal) or step in consts):
            found[k] = step
    return found


def slice_of(body: core.Jaxpr, needed: list[core.Var], producers: dict[core.Var, core.JaxprEqn]
           ) -> tuple[core.JaxprEqn, ...]:
    want = set(needed)
    keep = set()
    for eqn in reversed(body.eqns):
        if any(v in want for v in eqn.outvars):
            keep.add(id(eqn))
            want.update(v for v in eqn.invars if not isinstance(v, core.Literal))
    return tuple(eqn for eqn in body.eqns if id(eqn) in keep)


def _read(env: dict[core.Var, Any], v: core.Atom) -> Any:
    return v.val if isinstance(v, core.Literal) else env[v]


def per_step(p: Steps, closed: core.ClosedJaxpr, num_consts: int, num_carry: int, consts: Any, init: Any,
             xs: Any, length: int, reverse: bool) -> dict[core.Var, jax.Array]:
    """The values the decision reads, for every step in the order the loop runs them."""
    body = closed.jaxpr
    carry_in = body.invars[num_consts:num_consts + num_carry]
    xs_run = [jnp.flip(x, 0) if reverse else x for x in xs]
    steps = jnp.arange(length)
    env0: dict[core.Var, Any] = dict(zip(body.constvars, closed.consts, strict=True))
    env0.update(zip(body.invars[:num_consts], consts, strict=True))
    env0.update((carry_in[k], init[k]) for k in range(num_carry))
    counts = {k: init[k] + (steps * _read(env0, d)).astype(init[k].dtype) for k, d in p.counters.items()}

    def one_step(x: list[Any], count: dict[int, Any]) -> list[Any]:
        env = dict(env0)
        env.update(zip(body.invars[num_consts + num_carry:], x, strict=True))
        env.update((carry_in[k], c) for k, c in count.items())
        for eqn in p.slice:
            outs = eqn.primitive.bind(*[_read(env, v) for v in eqn.invars],
                                      **eqn.primitive.get_bind_params(eqn.params))
            env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs], strict=True))
        return [env[v] for v in p.needed]

    values = jax.vmap(one_step, axis_size=length)(xs_run, counts)
    return dict(zip(p.needed, values, strict=True))


def decide_known(p: Plan, closed: core.ClosedJaxpr, num_consts: int, num_carry: int, consts: Any, init: Any,
                 xs: Any, length: int, reverse: bool, offsets: list[int], dtype: Any,
                 memo: Optional[dict[int, Any]] = None) -> Optional[tuple[dict[int, np.ndarray], bool, np.ndarray]]:
    """:func:`decide`, made while tracing when everything it reads is known then (``known``):
    the loop's indices from a scanned ``jnp.arange`` or a counter from a constant, arrays made
    in the program; else ``None``. Nothing is staged: the moved carries come back as NumPy
    constants, ``fired`` as a Python bool."""
    memo = {} if memo is None else memo
    starts = {k: known.value(init[k], memo) for k in p.moved}
    if any(v is None for v in starts.values()):
        return None
    values = known.per_step(p.slice, p.needed, p.counters, closed, num_consts, num_carry, consts, init, xs,
                            length, reverse, memo)
    if values is None:
        return None
    with np.errstate(over="ignore"):
        outs, fired, record = decide(p, values, {k: starts.get(k) for k in range(num_carry)}, length, offsets,
                                     dtype, xp=np)
    carry_avals = [v.aval for v in closed.jaxpr.invars[num_consts:num_consts + num_carry]]
    outs = {k: np.asarray(v).astype(carry_avals[k].dtype) for k, v in outs.items()}
    return outs, bool(fired), np.asarray(record).astype(dtype)


NONE = np.iinfo(np.int32).max  # a position or step of :func:`first_where` where nothing holds


def first_where(bad: Any, fields: list[Any], xp: Any = jnp) -> tuple[Any, list[Any]]:
    """The first position where ``bad`` ``[N]`` holds (``NONE``: none) and each of ``fields``
    (``[N]`` each) there (zeros: none).

    Staged, it is one variadic reduction that carries the fields along: XLA makes it one kernel,
    with the elementwise work that computes its operands fused in, where an ``argmax`` and then
    a pick at its result are two kernels, the second waiting for the first (each kernel outside
    the loop is time on every call of ``jta.checked``). ``xp``: ``numpy`` while tracing."""
    if xp is np:
        bad = np.asarray(bad).reshape(-1)
        if not bad.any():
            return np.int32(NONE), [np.zeros((), np.asarray(f).dtype) for f in fields]
        k = int(np.argmax(bad))
        return np.int32(k), [np.asarray(f)[k] for f in fields]
    key = jnp.where(bad, lax.iota(jnp.int32, bad.shape[0]), jnp.int32(NONE))

    def earlier(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        take = b[0] < a[0]  # (positions differ, or both are NONE: then either will do)
        return tuple(jnp.where(take, y, x) for x, y in zip(a, b, strict=True))

    inits = (np.int32(NONE), *(np.zeros((), f.dtype) for f in fields))
    found = lax.reduce((key, *fields), inits, earlier, (0,))
    return found[0], list(found[1:])


def _vector(xp: Any, dtype: Any, *fields: Any) -> Any:
    """``[*fields]``; staged, from one-hot constants (``packed``), so that XLA fuses it with the
    selects around it, where a stack or an append is a concatenate: a kernel of its own."""
    if xp is np:
        return np.asarray([np.asarray(f) for f in fields]).astype(dtype)
    return packed(dtype, len(fields), *fields)


def _site_at(xp: Any, site: Any, t: Any, length: Any) -> Any:
    """``site[t]``, ``t`` clamped into the loop (a report that never fires reads some step)."""
    if xp is np:
        return np.asarray(site)[min(int(t), int(length) - 1)]
    return lax.dynamic_index_in_dim(site, t, keepdims=False)  # (which clamps)


def decide(p: Plan, values: dict[core.Var, Any], init: Any, length: int, offsets: list[int], dtype: Any,
           xp: Any = jnp) -> tuple[dict[int, Any], Any, Any]:
    """The moved carries after the loop, whether any report fires, and the first one's record
    ``[code, v1, v2, v3, site]`` (``offsets``: each report's offset into the site table).

    Each record's first error, and each report's first firing, is one :func:`first_where` over
    the steps, carrying the entry along (a step's first update that records is a select per
    update, fused into it); the reports are then combined as scalars, in program order (the
    earliest step, then the first report at it). Entries stay columns (``[T]`` per field): a
    stack of them would be a concatenate, a kernel of its own. ``xp``: ``jax.numpy`` (staged
    into the program) or ``numpy`` (``values`` and ``init`` known while tracing, ``known``: the
    decision is made then, and nothing is staged)."""
    def value(v: core.Atom) -> Any:
        if isinstance(v, core.Literal):
            return xp.broadcast_to(xp.asarray(v.val), (length, *np.shape(v.val)))
        return values[v]

    outs: dict[int, Any] = {}
    # id(eqn) -> (bad [T], its entry's four columns [T] of a dtype)
    by_event: dict[int, tuple[Any, Callable[[Any], list[Any]]]] = {}
    for k, chain in p.flags.items():
        slots = xp.stack([value(e.invars[2]) for e in chain], axis=1)
        outs[k], codes = replay(init[k], slots, tuple(e.params["op"] for e in chain), xp=xp)
        for c in range(len(chain)):
            by_event[id(chain[c])] = (codes[:, c] != 0, functools.partial(_slot_entries, xp, codes[:, c], slots[:, c]))

    def updates(lin: Lineage, dtype: Any) -> tuple[Any, list[Any]]:
        """Per step, whether any of a lineage's (one or more) updates records, and the entry of
        the first that does (zeros: none), as columns."""
        for eqn in lin.events:
            if id(eqn) not in by_event:  # a jta_record: its ``bad`` and ``entry`` operands
                by_event[id(eqn)] = (value(eqn.invars[1]).astype(bool),
                                     functools.partial(_record_entries, value(eqn.invars[2])))
        bad, entry = xp.zeros((length,), bool), [xp.zeros((length,), dtype)] * 4
        for e in reversed(lin.events):
            now, columns = by_event[id(e)][0], by_event[id(e)][1](dtype)
            bad, entry = bad | now, [xp.where(now, c, o) for c, o in zip(columns, entry, strict=True)]
        return bad, entry

    steps = xp.arange(length)
    received: dict[int, tuple[Any, Any]] = {}  # record carry -> (bad [T], record) as steps got it
    fires_from: dict[int, Any] = {}  # record carry -> the step from which the record it returns holds an error
    for k, lin in p.records.items():
        start = init[k]
        if not lin.events:
            outs[k], received[k] = start, (xp.broadcast_to(start[0] != 0, (length,)), start)
            continue
        t, entry = first_where(*updates(lin, start.dtype), xp=xp)
        fresh = (start[0] == 0) & (t != NONE)
        outs[k] = first_error(start, fresh, _vector(xp, start.dtype, *entry), xp=xp)
        received[k] = ((start[0] != 0) | (fresh & (t < steps)), outs[k])
        fires_from[k] = xp.where(start[0] != 0, xp.int32(0), xp.where(fresh, t, xp.int32(NONE)))

    best, record = xp.int32(NONE), xp.zeros((5,), dtype)
    for (eqn, lin), offset in zip(p.reports, offsets, strict=True):
        site = value(eqn.invars[1]).astype(dtype) + xp.asarray(offset).astype(dtype)
        if isinstance(lin.root, int) and lin.root in fires_from and lin.events == p.records[lin.root].events:
            # A check of the record the step returns (a mutator's): it fires from the step of the
            # carry's first error on, and reports that record.
            at = fires_from[lin.root]
            carried = outs[lin.root]
            mine = _vector(xp, dtype, *(carried[c] for c in range(carried.shape[0])), _site_at(xp, site, at, length))
        else:
            at, mine = _report(xp, lin, updates, received, value, site, length, dtype)
        take = at < best  # (a tie: the earlier report, in program order)
        best, record = xp.where(take, at, best), xp.where(take, mine, record)
    return outs, best != NONE, record


def _report(xp: Any, lin: Lineage, updates: Callable[[Lineage, Any], tuple[Any, list[Any]]],
            received: dict[int, tuple[Any, Any]], value: Callable[[Any], Any], site: Any, length: Any,
            dtype: Any) -> tuple[Any, Any]:
    """A report's first firing step (``NONE``: never) and the record it reports then: the record
    it received when that holds an error, else its first update's entry at that step."""
    if isinstance(lin.root, int):
        root_bad, root = received[lin.root]
        roots = [xp.broadcast_to(root[c].astype(dtype), (length,)) for c in range(4)]
    else:
        rows = value(lin.root).astype(dtype)
        root_bad, roots = rows[:, 0] != 0, _record_entries(rows, dtype)
    bad, own = updates(lin, dtype) if lin.events else (False, roots)
    fired = root_bad | bad
    candidates = [xp.where(root_bad, r, o) for r, o in zip(roots, own, strict=True)]
    at, fields = first_where(fired, [*candidates, site], xp)
    return at, _vector(xp, dtype, *fields)


def _slot_entries(xp: Any, codes: Any, slots: Any, dtype: Any) -> list[Any]:
    """The entry a ``jta_slot`` op records at each step, ``[code, slot, 0, 0]``, as columns."""
    zeros = xp.zeros_like(codes).astype(dtype)
    return [codes.astype(dtype), slots.astype(dtype), zeros, zeros]


def _record_entries(entries: Any, dtype: Any) -> list[Any]:
    """A ``jta_record``'s entries ``[T, 4]`` as columns."""
    return [entries[:, c].astype(dtype) for c in range(4)]
