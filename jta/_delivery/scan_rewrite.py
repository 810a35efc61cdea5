"""The loop a JAX expert would write: a scan's TensorArray rows as its stacked outputs and inputs.

A TensorArray carried through a ``lax.scan`` and written once per step at an index fixed for the
step (the counter, a scanned input, a value fixed before the loop: what hoisting proves, see
``hoisting``) is, to JAX's differentiation, a buffer updated in place in every step: reverse mode
saves the index per step, and the backward loop carries the cotangent buffer and reads its row.
The expert's loop returns the rows as the scan's stacked output (``ys``) and writes them into the
buffer once, after the loop; a read of an array the loop does not write is the expert's scanned
input (``xs``), gathered once before the loop. JAX then differentiates a native scan.

:func:`rewritten` finds, in a scan body,

* **writes**: a carried buffer whose only use in the body is one ``write_row`` (``jta._core.buffer``)
  that returns the buffer the step carries on, at an index fixed for the step;
* **reads**: a ``read_row`` of a buffer the loop does not change (a const of the scan, or a carry
  the body returns as it received it), at an index fixed for the step;
* **chained** buffers (W3): a carried buffer read once and written once per step, where step
  ``t`` reads the row step ``t - 1`` wrote, as the indices known while tracing prove (a scanned
  ``jnp.arange``, a counter from a constant): the carry becomes that row;

and returns the same computation as a jaxpr: the indices of every step (known while tracing, by
``known.per_step`` as hoisting's decision knows them, or computed for all steps at once, as
hoisting computes them; a loop whose index dtype cannot count its buffer's rows is left alone),
the rows read sliced or gathered before the loop, the loop without those buffers, and the rows written put in place after it (a
slice when the rows are consecutive: known while tracing, else decided by a ``cond``). It is exact: rows are clamped into the buffer
as the in-loop write and read clamp them; a row written twice keeps the last write in the loop's
order (for a forward array, whose second write is an error the bookkeeping still records), or the
sum of the writes (a gradient array, or ``checks=False``); the tangent of a write is the scatter-add
of every write's tangent, as it is in the loop. The bookkeeping (slot flags, records, checks) stays
in the loop, untouched: hoisting takes it out where it can, as before.

Only differentiation uses it (``jax_rules``, section 4): the scan JAX linearizes (or JVPs) is the
rewritten one; everything else about the program is unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import api_util, core
from jax._src import linear_util as lu
from jax._src.ad_util import Zero
from jax._src.custom_derivatives import custom_jvp_call_p
from jax._src.interpreters import ad
from jax._src.interpreters import partial_eval as pe

from .._core import buffer
from . import hoisting
from .known import per_step as _per_step
from .known import starts as _starts

_BUFFER = os.path.realpath(buffer.__file__)


def _callee(eqn: core.JaxprEqn) -> Optional[str]:
    """``"write"`` for a ``buffer.write_row`` (its differentiable form), ``"read"`` for a
    ``buffer.read_row``, else ``None``."""
    if eqn.primitive is not custom_jvp_call_p:
        return None
    return _kind(getattr(eqn.params["call_jaxpr"].jaxpr.debug_info, "func_src_info", None) or "")


@functools.lru_cache(maxsize=64)
def _kind(source: str) -> Optional[str]:
    name, _, where = source.partition(" at ")
    if os.path.realpath(where.rpartition(":")[0]) != _BUFFER:
        return None
    return {"_write_row_diff": "write", "read_row": "read"}.get(name)


def _primitives(jaxpr: core.Jaxpr) -> set[str]:
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in core.jaxprs_in_params(eqn.params):
            names |= _primitives(sub)
    return names


def _is_row_of(data: core.Atom, row: core.Atom) -> bool:
    d, r = data.aval, row.aval
    return (isinstance(d, core.ShapedArray) and isinstance(r, core.ShapedArray) and d.ndim == r.ndim + 1
            and d.shape[1:] == r.shape and d.shape[0] > 0 and jnp.issubdtype(d.dtype, jnp.inexact))


def _dtype(v: core.Atom) -> Any:
    aval: Any = v.aval
    return aval.dtype


def _is_index(v: core.Atom) -> bool:
    a = v.aval
    return isinstance(a, core.ShapedArray) and a.ndim == 0 and jnp.issubdtype(a.dtype, jnp.integer)


def _counts_rows(eqn: core.JaxprEqn) -> bool:
    """Whether the index of a ``write_row`` or ``read_row`` counts every row of its buffer. XLA
    clamps a narrower index in its own dtype, where the row count wraps, and not alike in every
    kernel (a ``uint8`` index 155 into 300 rows: an update sets row 43, an add fused with it
    updates row 155), so where such a row lands depends on how XLA compiles the loop: a loop
    that has one keeps JAX's rule, the program it would be without the rewrite."""
    data, index = eqn.invars[:2]
    return int(np.iinfo(_dtype(index)).max) >= _shape(data)[0]


def _shape(v: core.Atom) -> tuple[int, ...]:
    aval: Any = v.aval
    return aval.shape


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """A scan with its rows moved out (see :func:`analyse`)."""

    writes: tuple[tuple[int, core.Atom, bool], ...]  # (carry, index, aggregate) per write, in carry order
    reads: tuple[tuple[int, core.Atom], ...]  # (body input of the buffer, index) per read
    steps: hoisting.Steps
    body: core.ClosedJaxpr  # consts, carries, xs, rows read, [init rows] -> carries, ys, rows written
    # Buffers read at the row the previous step wrote (W3): (carry, rows read, rows written, aggregate),
    # rows known while tracing, in the order the loop runs; the carry holds the last row written.
    chained: tuple[tuple[int, np.ndarray, np.ndarray, bool], ...] = ()


def analyse(closed: core.ClosedJaxpr, num_consts: int, num_carry: int,
            known: Optional[Callable[[core.Atom], Optional[np.ndarray]]] = None) -> Optional[Rewrite]:
    """The writes and reads of ``closed`` (a scan body) that can leave the loop, or ``None``
    (``known``: an index's value at every step, in the order the loop runs, when it is known
    while tracing)."""
    body = closed.jaxpr
    if not all(_counts_rows(eqn) for eqn in body.eqns if _callee(eqn) is not None):
        return None
    carry_in = list(body.invars[num_consts:num_consts + num_carry])
    carry_out = list(body.outvars[:num_carry])
    position = {v: k for k, v in enumerate(body.invars)}
    uses: dict[core.Var, list[tuple[core.JaxprEqn, int]]] = {}
    for eqn in body.eqns:
        for n, v in enumerate(eqn.invars):
            if isinstance(v, core.Var):
                uses.setdefault(v, []).append((eqn, n))
    out_count: dict[core.Var, int] = {}
    for v in body.outvars:
        if isinstance(v, core.Var):
            out_count[v] = out_count.get(v, 0) + 1

    producers = {v: eqn for eqn in body.eqns for v in eqn.outvars}
    counters = hoisting.find_counters(body, carry_in, carry_out, producers, num_consts, set())
    invariant = {carry_in[k] for k in range(num_carry) if carry_out[k] is carry_in[k]}
    fixed = hoisting.fixed_values(body, num_consts, num_carry, counters, frozenset())

    def steady(v: core.Atom) -> bool:
        return _is_index(v) and (isinstance(v, core.Literal) or v in fixed)

    writes, write_eqns = [], []
    for k, v in enumerate(carry_in):
        found = uses.get(v, [])
        if len(found) != 1 or out_count.get(v, 0):
            continue
        (eqn, n), = found
        if n != 0 or _callee(eqn) != "write" or eqn.outvars[0] is not carry_out[k]:
            continue
        if uses.get(eqn.outvars[0]) or out_count.get(eqn.outvars[0]) != 1:
            continue
        data, index, value = eqn.invars
        if not steady(index) or not _is_row_of(data, value):
            continue
        aggregate = "dynamic_slice" in _primitives(eqn.params["call_jaxpr"].jaxpr)
        writes.append((k, index, aggregate))
        write_eqns.append(eqn)
    chained, chain_eqns = [], []
    for k, v in enumerate(carry_in):
        found = uses.get(v, [])
        if known is None or len(found) != 2 or out_count.get(v, 0) or any(n != 0 for _, n in found):
            continue
        read = [e for e, _ in found if _callee(e) == "read"]
        write = [e for e, _ in found if _callee(e) == "write"]
        if len(read) != 1 or len(write) != 1:
            continue
        (r,), (w,) = read, write
        if w.outvars[0] is not carry_out[k] or uses.get(w.outvars[0]) or out_count.get(w.outvars[0]) != 1:
            continue
        if not (steady(r.invars[1]) and steady(w.invars[1]) and _is_row_of(v, w.invars[2])
                and _is_row_of(v, r.outvars[0])):
            continue
        got_read, got_written = known(r.invars[1]), known(w.invars[1])
        if got_read is None or got_written is None:
            continue
        cap = _shape(v)[0]
        rows_read, rows_written = _starts(got_read, cap), _starts(got_written, cap)
        if rows_read is None or rows_written is None:
            continue
        aggregate = "dynamic_slice" in _primitives(w.params["call_jaxpr"].jaxpr)
        # Step t reads what step t - 1 wrote (for a sum, the only write to that row before it);
        # step 0 reads the buffer as the loop received it.
        if not np.array_equal(rows_read[1:], rows_written[:-1]):
            continue
        if aggregate and np.unique(rows_written).size != rows_written.size:
            continue
        chained.append((k, rows_read, rows_written, aggregate))
        chain_eqns.append((r, w))
    reads, read_eqns = [], []
    for eqn in body.eqns:
        if _callee(eqn) != "read":
            continue
        data, index = eqn.invars
        if not isinstance(data, core.Var) or data not in position:
            continue
        if not (position[data] < num_consts or data in invariant):
            continue
        if not steady(index) or not _is_row_of(data, eqn.outvars[0]):
            continue
        reads.append((position[data], index))
        read_eqns.append(eqn)
    if not writes and not reads and not chained:
        return None

    gone = {id(e) for e in write_eqns + read_eqns} | {id(e) for pair in chain_eqns for e in pair}
    written = {k for k, _, _ in writes}
    # A chained buffer's carry becomes the row its read returns (the last row written), and the
    # step returns the row it writes (for a sum: added to the buffer's row as the loop got it,
    # a scanned input).
    carry_in = list(carry_in)
    carry_out = list(carry_out)
    extra_in, extra_eqns = [], []
    for (k, _, _, aggregate), (r, w) in zip(chained, chain_eqns, strict=True):
        carry_in[k] = r.outvars[0]
        carry_out[k] = w.invars[2]
        if aggregate:
            row = core.Var(r.outvars[0].aval)
            total = core.Var(r.outvars[0].aval)
            extra_in.append(row)
            extra_eqns.append(core.new_jaxpr_eqn([row, w.invars[2]], [total], lax.add_p, {}, core.no_effects,
                                                 w.source_info))
            carry_out[k] = total
    invars = [*body.invars[:num_consts], *(v for k, v in enumerate(carry_in) if k not in written),
              *body.invars[num_consts + num_carry:], *(e.outvars[0] for e in read_eqns), *extra_in]
    outvars = [*(v for k, v in enumerate(carry_out) if k not in written), *body.outvars[num_carry:],
               *(e.invars[2] for e in write_eqns), *(w.invars[2] for _, w in chain_eqns)]
    new = core.Jaxpr(body.constvars, invars, outvars, [e for e in body.eqns if id(e) not in gone] + extra_eqns,
                     body.effects, body.debug_info.with_unknown_names())
    new, _ = pe.dce_jaxpr(new, [True] * len(outvars), instantiate=True)
    indices = [i for _, i, _ in writes] + [i for _, i in reads]
    needed = tuple(dict.fromkeys(v for v in indices if isinstance(v, core.Var)))
    steps = hoisting.Steps(counters, needed, hoisting.slice_of(body, list(needed), producers))
    return Rewrite(tuple(writes), tuple(reads), steps, core.ClosedJaxpr(new, closed.consts), tuple(chained))


def _index_of(values: dict[core.Var, jax.Array], v: core.Atom, length: int) -> jax.Array:
    if isinstance(v, core.Literal):
        return jnp.full((length,), v.val)
    return values[v]


def _rows(index: jax.Array, cap: int) -> jax.Array:
    """The rows the loop's dynamic slices touch: the index clamped into the buffer."""
    return jnp.clip(index, 0, cap - 1).astype(jnp.int32)


def _contiguous(rows: jax.Array) -> jax.Array:
    """Whether ``rows`` are ``r, r + 1, ...`` (then a block: one slice, no gather or scatter)."""
    return jnp.all(rows == rows[0] + jnp.arange(rows.shape[0], dtype=rows.dtype))


def _read_rows(data: jax.Array, rows: jax.Array) -> jax.Array:
    """``data[rows]`` (``rows`` in range); a block of consecutive rows is sliced."""
    def gather() -> jax.Array:
        # Gathered last step first: the transpose (a scatter-add) then adds the rows'
        # cotangents in the order the backward loop added them, last step first.
        return jnp.flip(jnp.take(data, jnp.flip(rows, 0), axis=0, mode="clip"), 0)

    if rows.shape[0] > data.shape[0]:
        return gather()
    return lax.cond(_contiguous(rows), lambda: lax.dynamic_slice_in_dim(data, rows[0], rows.shape[0], 0), gather)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def _write_rows(data: jax.Array, rows: jax.Array, values: jax.Array, aggregate: bool, start: Optional[int]
                ) -> jax.Array:
    """``data`` after writing ``values[t]`` into row ``rows[t]`` (in range), ``t`` in the order the
    loop runs: added (``aggregate``) or set, a row written twice keeping the last write. With a
    ``start`` known at trace time, ``rows`` are ``start, start + 1, ...`` (``values`` in that order)."""
    values = values.astype(data.dtype)
    cap, n = data.shape[0], rows.shape[0]
    if start is not None:
        if aggregate:
            return buffer.add_block_p.bind(data, values, start)
        return lax.dynamic_update_slice_in_dim(data, values, start, 0)

    def scatter() -> jax.Array:
        if aggregate:
            return data.at[rows].add(values, mode="clip")
        steps = jnp.arange(1, n + 1, dtype=jnp.int32)
        last = jnp.zeros((cap,), jnp.int32).at[rows].max(steps)
        kept = jnp.where(last[rows] == steps, rows, cap)
        return data.at[kept].set(values, mode="drop", unique_indices=True)

    def block() -> jax.Array:
        if aggregate:
            return buffer.add_block_p.bind(data, values, rows[0])
        return lax.dynamic_update_slice_in_dim(data, values, rows[0], 0)

    return scatter() if n > cap else lax.cond(_contiguous(rows), block, scatter)


@_write_rows.defjvp
def _write_rows_jvp(aggregate: bool, start: Optional[int], primals: Any, tangents: Any
                    ) -> tuple[jax.Array, jax.Array]:
    # Every write's tangent is added to its row, as the loop's ``write_row`` tangent does, by a
    # linear map whose transpose passes the cotangent buffer through and reads the rows out.
    data, rows, values = primals
    t_data, _, t_values = tangents
    t_data, t_values = ad.instantiate_zeros(t_data), ad.instantiate_zeros(t_values).astype(data.dtype)

    def scatter() -> jax.Array:
        return t_data.at[rows].add(t_values, mode="clip")

    def block() -> jax.Array:
        return buffer.add_block_p.bind(t_data, t_values, rows[0])

    if start is not None:
        tangent = buffer.add_block_p.bind(t_data, t_values, start)
    elif rows.shape[0] > data.shape[0]:
        tangent = scatter()
    else:
        tangent = lax.cond(_contiguous(rows), block, scatter)
    return _write_rows(data, rows, values, aggregate, start), tangent


def _run(rw: Rewrite, params: dict[str, Any], num_consts: int, num_carry: int, starts: list[Optional[int]],
         *args: Any) -> list[Any]:
    length, reverse = params["length"], params["reverse"]
    consts, init, xs = args[:num_consts], args[num_consts:num_consts + num_carry], args[num_consts + num_carry:]
    dynamic = any(start is None and not isinstance(index, core.Literal)
                  for start, index in zip(starts, [i for _, i, _ in rw.writes] + [i for _, i in rw.reads], strict=True))
    values = hoisting.per_step(rw.steps, params["jaxpr"], num_consts, num_carry, consts, init, xs, length,
                               reverse) if dynamic else {}  # (the indices of every step, unless known)

    def in_array_order(x: jax.Array) -> jax.Array:
        return jnp.flip(x, 0) if reverse else x

    write_starts, read_starts = starts[:len(rw.writes)], starts[len(rw.writes):]
    rows_read = []
    for (position, index), start in zip(rw.reads, read_starts, strict=True):
        data = args[position]
        if start is not None:  # (in the scanned inputs' order)
            rows_read.append(lax.slice_in_dim(data, start, start + length))
        else:
            rows_read.append(in_array_order(_read_rows(data, _rows(_index_of(values, index, length), data.shape[0]))))
    written = {k for k, _, _ in rw.writes}
    kept = [k for k in range(num_carry) if k not in written]
    start_of = {k: int(rows_read[0]) for k, rows_read, _, _ in rw.chained}
    init_rows = []
    for k, _, rows, aggregate in rw.chained:
        if aggregate:  # the rows the loop writes, as the buffer had them
            init_rows.append(buffer.take_rows(init[k], np.asarray(rows[::-1] if reverse else rows, np.int32)))
    carry_init = [lax.index_in_dim(init[k], start_of[k], keepdims=False) if k in start_of else init[k] for k in kept]
    outs = lax.scan_p.bind(*consts, *carry_init, *xs, *rows_read, *init_rows,
                           **dict(params, jaxpr=rw.body, num_carry=len(kept)))
    carry = dict(zip(kept, outs[:len(kept)], strict=True))
    n_chained = len(rw.chained)
    outs, chain_rows = outs[:len(outs) - n_chained], outs[len(outs) - n_chained:]
    for (k, _, rows, aggregate), values in zip(rw.chained, chain_rows, strict=True):
        cap = init[k].shape[0]
        start = _start(rows, reverse, cap)
        if start is not None:
            carry[k] = _write_rows(init[k], jnp.zeros((0,), jnp.int32), values, aggregate, start)
        else:
            carry[k] = _write_rows(init[k], jnp.asarray(rows, jnp.int32), in_array_order(values), aggregate, None)
    ys, rows_written = outs[len(kept):len(outs) - len(rw.writes)], outs[len(outs) - len(rw.writes):]
    for (k, index, aggregate), rows, start in zip(rw.writes, rows_written, write_starts, strict=True):
        if start is not None:  # (in the stacked outputs' order)
            carry[k] = _write_rows(init[k], jnp.zeros((0,), jnp.int32), rows, aggregate, start)
        else:
            carry[k] = _write_rows(init[k], _rows(_index_of(values, index, length), init[k].shape[0]),
                                   in_array_order(rows), aggregate, None)
    return [*(carry[k] for k in range(num_carry)), *ys]


def _knower(closed: core.ClosedJaxpr, primals: Sequence[Any], num_consts: int, num_carry: int, length: int,
            reverse: bool) -> Callable[[core.Atom], Optional[np.ndarray]]:
    """``known(v)``: the body's value ``v`` at every step, in the order the loop runs, when it is
    known while tracing, else ``None``: ``known.per_step`` on the equations that compute ``v``,
    the evaluator hoisting decides a loop's checks with (bit for bit XLA's integer ops)."""
    body = closed.jaxpr
    carry_in, carry_out = body.invars[num_consts:num_consts + num_carry], body.outvars[:num_carry]
    producers = {v: eqn for eqn in body.eqns for v in eqn.outvars}
    counters = hoisting.find_counters(body, list(carry_in), list(carry_out), producers, num_consts, set())
    consts, init = primals[:num_consts], primals[num_consts:num_consts + num_carry]
    xs = primals[num_consts + num_carry:]
    memo: dict[int, Any] = {}  # (``known.value``'s, for the operands: shared by every index)
    found: dict[core.Var, Optional[np.ndarray]] = {}

    def known(v: core.Atom) -> Optional[np.ndarray]:
        if isinstance(v, core.Literal):
            return np.full((length,), v.val, _dtype(v))
        if v not in found:
            got = _per_step(hoisting.slice_of(body, [v], producers), (v,), counters, closed, num_consts, num_carry,
                            consts, init, xs, length, reverse, memo)
            found[v] = None if got is None else got[v]
        return found[v]

    return known


def _start(values: Optional[np.ndarray], reverse: bool, cap: int) -> Optional[int]:
    """The first row when the rows of an index's ``values`` (in the order the loop runs) are
    ``r, r + 1, ...`` in the scanned order, else ``None``."""
    rows = None if values is None else _starts(values, cap)
    if rows is None:
        return None
    rows = rows[::-1] if reverse else rows
    return int(rows[0]) if np.array_equal(rows, rows[0] + np.arange(rows.size)) else None


_SCAN_PARAMS = {"jaxpr", "length", "reverse", "num_consts", "num_carry", "unroll"}  # (jax 0.10's)


def rewritten(primals: Sequence[Any], params: dict[str, Any]) -> Optional[core.ClosedJaxpr]:
    """The scan ``scan_p.bind(*primals, **params)`` as a jaxpr of the loop an expert would write
    (taking the same operands), or ``None`` when no row leaves the loop."""
    if not _SCAN_PARAMS <= params.keys() or not isinstance(params["length"], int) or params["length"] == 0:
        return None  # (a JAX whose scan this module was not written for: JAX's own rule)
    if not all(core.is_constant_shape(np.shape(p)) for p in primals) or not all(
            core.is_constant_shape(getattr(a, "shape", ())) for a in params["jaxpr"].in_avals):
        return None  # (symbolic shapes, jax.export: row counts are not known while tracing)
    num_consts, num_carry = params["num_consts"], params["num_carry"]
    body, length, reverse = params["jaxpr"].jaxpr, params["length"], params["reverse"]
    known = _knower(params["jaxpr"], primals, num_consts, num_carry, length, reverse)
    rw = analyse(params["jaxpr"], num_consts, num_carry, known)
    if rw is None:
        return None
    targets = [(index, body.invars[num_consts + k].aval.shape[0]) for k, index, _ in rw.writes]
    targets += [(index, body.invars[position].aval.shape[0]) for position, index in rw.reads]
    starts = [_start(known(index), reverse, cap) for index, cap in targets]
    avals = [core.typeof(p) for p in primals]

    def fn(*args: Any) -> list[Any]:
        return _run(rw, params, num_consts, num_carry, starts, *args)

    debug = api_util.debug_info("jta: a scan's rows as its inputs and outputs", fn, tuple(avals), {})
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(fn, debug_info=debug), list(avals))
    return core.ClosedJaxpr(jaxpr, consts)


def linearize(closed: core.ClosedJaxpr, is_vjp: bool, nzs: Sequence[bool], primals: Sequence[Any]) -> Any:
    """JAX's linearization of ``closed`` applied to ``primals`` (a primitive's linearize rule:
    ``(primals_out, nonzero tangents out, residuals, tangent function)``)."""
    primal_jaxpr, num_res, nzs_out, in_fwd_res, tangent_jaxpr = ad.linearize_jaxpr(closed, nzs, is_vjp=is_vjp)
    outs = core.eval_jaxpr(primal_jaxpr.jaxpr, primal_jaxpr.consts, *primals)
    primals_out, residuals = outs[:len(outs) - num_res], outs[len(outs) - num_res:]
    fresh = iter(residuals)
    sources = [*closed.consts, *primals]
    residuals = [next(fresh) if f is None else sources[f] for f in in_fwd_res]
    tangent_avals = [a.to_tangent_aval() for a in closed.out_avals]

    def tangent_fun(res: Any, *tangents: Any) -> list[Any]:
        nonzero = [t for t, nz in zip(tangents, nzs, strict=True) if nz]
        out = iter(core.eval_jaxpr(tangent_jaxpr.jaxpr, tangent_jaxpr.consts, *res, *nonzero))
        return [next(out) if nz else Zero(a) for a, nz in zip(tangent_avals, nzs_out, strict=True)]

    return primals_out, nzs_out, residuals, tangent_fun


def jvp(closed: core.ClosedJaxpr, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """JAX's JVP of ``closed`` (a primitive's JVP rule)."""
    nonzeros = [type(t) is not Zero for t in tangents]
    jvp_jaxpr, out_nz = ad.jvp_jaxpr(closed, nonzeros, instantiate=False)
    outs = core.eval_jaxpr(jvp_jaxpr.jaxpr, jvp_jaxpr.consts, *primals,
                           *(t for t, nz in zip(tangents, nonzeros, strict=True) if nz))
    n = len(closed.out_avals)
    dots = iter(outs[n:])
    return outs[:n], [next(dots) if nz else Zero(a.to_tangent_aval())
                      for a, nz in zip(closed.out_avals, out_nz, strict=True)]
