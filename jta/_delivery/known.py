"""Values known while tracing: what a loop's bookkeeping reads, computed in NumPy at trace time.

Most loops index their arrays with ``jnp.arange(T)`` scanned in, a counter that starts at a
constant, or arithmetic on those; the arrays are made in the same program, their flags and records
start empty. Then everything the decision after a loop reads (``hoisting.decide``: whether an index
is in range, the slot it marks, the record it would make) is known while tracing, and the decision
itself is: :func:`per_step` computes those values for every step in NumPy (nothing is staged,
nothing compiled), and the decision runs on them in NumPy too. A program whose checks are known to
pass then holds no decision at all; one known to fail holds its record as a constant.

:func:`value` is an operand's value when it is known (a concrete array, a constant, or a few cheap
integer ops on known values, read back through the tracer's equation); :func:`per_step` evaluates a
scan body's slice (``hoisting.Steps``) for every step at once, for a small set of integer
primitives, or gives up (``None``): the decision is then staged, as before. ``scan_rewrite``
asks it too, for the rows a differentiated scan writes and reads (:func:`starts`), so that the
rows it moves out of the loop are the ones the loop's own slices take.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Optional

import jax
import numpy as np
from jax import lax
from jax._src import core
from jax._src.custom_derivatives import custom_jvp_call_p
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import slicing
from jax._src.lax.slicing import GatherScatterMode
from jax._src.pjit import jit_p

from .._records import slots
from .._records.primitives import merged, record_p

LIMIT = 1 << 22  # elements of one value over all steps: larger slices are decided at run time


def _iota(dtype: Any, shape: tuple[int, ...], dimension: int, **_: Any) -> np.ndarray:
    along = np.arange(shape[dimension]).reshape([-1 if d == dimension else 1 for d in range(len(shape))])
    return np.broadcast_to(along, shape).astype(dtype)


def _broadcast_in_dim(a: np.ndarray, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...], **_: Any
                      ) -> np.ndarray:
    return np.broadcast_to(a.reshape([a.shape[broadcast_dimensions.index(d)] if d in broadcast_dimensions else 1
                                      for d in range(len(shape))]), shape)


def value(x: Any, memo: Optional[dict[int, Any]] = None, depth: int = 0) -> Optional[np.ndarray]:
    """``x``'s value when it is known while tracing: a concrete array, a constant, or integer ops
    (those of :func:`_run`, ``jit`` included) on known values, read back through the equations
    that made the tracer (``jnp.arange(1, T + 1)``: an iota plus a constant; an array's flags
    and record as made and updated at static indices). ``memo``: equations already evaluated
    (``id`` -> the equation and its results, or ``None``), shared by the calls of one trace."""
    if not isinstance(x, core.Tracer):
        return np.asarray(x) if isinstance(x, (np.ndarray, np.generic, jax.Array, int, bool)) else None
    const = getattr(x, "get_const", lambda: None)()
    if const is not None:  # (a constant of this trace: perhaps a tracer of an outer one)
        return value(const, memo, depth + 1) if isinstance(const, core.Tracer) else value(const)
    eqn = getattr(x, "parent", None)
    aval: Any = x.aval
    if eqn is None or depth > 200 or not _exact(aval) or aval.size > LIMIT:
        return None
    memo = {} if memo is None else memo
    if id(eqn) not in memo:
        memo[id(eqn)] = (eqn, None)  # (while it is evaluated: a cycle is unknown)
        outs = None
        if _foldable(eqn):
            ins: list[np.ndarray] = []
            for t in eqn.in_tracers:
                got = value(t, memo, depth + 1)
                if got is None:
                    break
                ins.append(got[None])
            else:
                with np.errstate(over="ignore"):  # (integers wrap, as XLA's do)
                    outs = _apply(eqn, ins, 1)
        memo[id(eqn)] = (eqn, None if outs is None else [o[0] for o in outs])
    outs = memo[id(eqn)][1]
    if outs is None:
        return _one_output_of_call(eqn, x, memo, depth) if eqn.primitive in _CALLS else None
    for v, out in zip(eqn.outvars, outs, strict=True):
        if v is getattr(x, "val", None):
            return out
    return outs[0] if len(outs) == 1 else None


def _one_output_of_call(eqn: Any, x: Any, memo: dict[int, Any], depth: int) -> Optional[np.ndarray]:
    """``x``, one output of a call (a nested ``jit``) that is not known whole: the call's body cut
    down to that output, from the inputs it reads. (The record of ``jax.jit(f)`` reads none of
    ``f``'s data when every decision in it was made while tracing, while the ``jit`` reads it all.)"""
    which = [v is getattr(x, "val", None) for v in eqn.outvars]
    if sum(which) != 1:
        return None
    inner = _body(eqn)
    part, used = pe.dce_jaxpr(inner.jaxpr, which)
    ins = []
    for reads, t in zip(used, eqn.in_tracers, strict=True):
        if reads:
            got = value(t, memo, depth + 1)
            if got is None:
                return None
            ins.append(got[None])
    with np.errstate(over="ignore"):  # (integers wrap, as XLA's do)
        outs = _eval(part, inner.consts, ins, 1)
    return None if outs is None else np.asarray(outs[0])[0]


def _body(eqn: Any) -> core.ClosedJaxpr:
    """A call's body (``jit``, ``closed_call``, ``custom_jvp_call``)."""
    inner = eqn.params["jaxpr"] if eqn.primitive is jit_p else eqn.params["call_jaxpr"]
    return inner if isinstance(inner, core.ClosedJaxpr) else core.ClosedJaxpr(inner, ())


def _foldable(eqn: Any) -> bool:
    return (eqn.primitive in _STEPPED or eqn.primitive in _CALLS) and all(
        _exact(v.aval) and v.aval.size <= LIMIT for v in [*eqn.invars, *eqn.outvars])


# -- a scan body's slice, for every step --------------------------------------------------------
def _elementwise(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *xs, **_: fn(*_aligned(xs))


def _aligned(xs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """Per-step operands ``[T, *shape]`` of an elementwise op, a scalar's ``[T]`` made
    ``[T, 1, ...]`` (lax broadcasts a rank-0 operand)."""
    rank = max(x.ndim for x in xs)
    return [x.reshape(x.shape + (1,) * (rank - x.ndim)) for x in xs]


def _shift(kind: str) -> Callable[..., np.ndarray]:
    """XLA's shifts: the amount read as unsigned; by the width or more, ``0`` (``left``,
    ``logical``) or the sign (``arithmetic``, of the bits read as signed, whatever the dtype)."""
    def rule(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(*_aligned((a, b)))
        bits = 8 * a.dtype.itemsize
        unsigned, signed = np.dtype(f"u{a.dtype.itemsize}"), np.dtype(f"i{a.dtype.itemsize}")
        amount = b.view(unsigned)
        past = amount >= bits
        amount = np.where(past, 0, amount).astype(unsigned)
        if kind == "left":
            out = np.where(past, 0, a.view(unsigned) << amount)
        elif kind == "logical":
            out = np.where(past, 0, a.view(unsigned) >> amount)
        else:
            as_signed = a.view(signed)
            out = np.where(past, np.where(as_signed < 0, -1, 0), as_signed >> amount.astype(signed)).astype(signed)
        return np.asarray(out).astype(unsigned if kind != "arithmetic" else signed).view(a.dtype)
    return rule


def _divide(remainder: bool) -> Callable[..., np.ndarray]:
    """XLA's integer ``div`` (rounded toward zero) and ``rem`` (the dividend's sign): by zero,
    ``-1`` (all bits set) and the dividend; the lowest signed value by ``-1``, itself and ``0``."""
    def rule(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(*_aligned((a, b)))
        zero = b == 0
        overflow = (b == -1) & (a == np.iinfo(a.dtype).min) if a.dtype.kind == "i" else np.zeros(a.shape, bool)
        safe = np.where(zero | overflow, 1, b).astype(a.dtype)
        quotient = np.abs(a.astype(object)) // np.abs(safe.astype(object))  # (exact, then truncated toward zero)
        quotient = np.where((a < 0) != (safe < 0), -quotient, quotient)
        if remainder:
            out = np.where(zero, a, np.where(overflow, 0, a.astype(object) - quotient * safe.astype(object)))
        else:
            out = np.where(zero, -1, np.where(overflow, a.astype(object), quotient))
        return _wrapped(out, a.dtype)
    return rule


def _wrapped(values: np.ndarray, dtype: Any) -> np.ndarray:
    """Python integers as ``dtype``, wrapped around as XLA's integers do."""
    bits = 8 * np.dtype(dtype).itemsize
    unsigned = np.asarray(values, object) % (1 << bits)
    return unsigned.astype(np.dtype(f"u{np.dtype(dtype).itemsize}")).view(dtype)


def _convert(x: np.ndarray, *, new_dtype: Any, **_: Any) -> np.ndarray:
    return (x != 0) if np.dtype(new_dtype) == np.bool_ else x.astype(new_dtype)


def _select_n(which: np.ndarray, *cases: np.ndarray) -> Optional[np.ndarray]:
    """``select_n`` as XLA runs it: its lowering compares ``which`` with each split point (a
    ``which`` out of range, which lax leaves unspecified, picks the first or the last case)."""
    if len(cases) > 32:
        return None
    chosen, *among = _aligned((which, *cases))
    if chosen.dtype != np.bool_:
        chosen = np.where(chosen < 0, 0, np.where(chosen < len(cases), chosen, len(cases) - 1))
    return np.choose(chosen.astype(np.intp), np.broadcast_arrays(*among))


def _clamp(lo: np.ndarray, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo, x, hi = _aligned((lo, x, hi))
    return np.minimum(np.maximum(x, lo), hi)


def _stepped_broadcast(a: np.ndarray, *, shape: tuple[int, ...],
                       broadcast_dimensions: tuple[int, ...], **_: Any) -> np.ndarray:
    return _broadcast_in_dim(a, (a.shape[0], *shape), (0, *(d + 1 for d in broadcast_dimensions)))


def _stepped_reshape(a: np.ndarray, *, new_sizes: tuple[int, ...], dimensions: Any, **_: Any
                     ) -> Optional[np.ndarray]:
    return None if dimensions is not None else a.reshape((a.shape[0], *new_sizes))


def _stepped_iota(**params: Any) -> np.ndarray:
    return _iota(**params)[None]


def _axes(axes: Any) -> tuple[int, ...]:
    return tuple(d + 1 for d in axes)


def _bitwise(ufunc: Any, logical: Callable[..., np.ndarray], ones: bool) -> Callable[..., np.ndarray]:
    """``reduce_and``/``reduce_or``: logical on booleans, bitwise on integers (their identity
    all ones, or zero, over an empty axis)."""
    def rule(a: np.ndarray, *, axes: Any, **_: Any) -> np.ndarray:
        if a.dtype == np.bool_:
            return logical(a, axis=_axes(axes))
        if not a.size:
            shape = [n for d, n in enumerate(a.shape) if d not in _axes(axes)]
            return ~np.zeros(shape, a.dtype) if ones else np.zeros(shape, a.dtype)
        return ufunc.reduce(a, axis=_axes(axes))
    return rule


def _extreme(fn: Callable[..., np.ndarray], lowest: bool) -> Callable[..., np.ndarray]:
    """``reduce_max``/``reduce_min``: over an empty axis, the identity (the dtype's lowest or
    highest value, as lax's)."""
    def rule(a: np.ndarray, *, axes: Any, **_: Any) -> np.ndarray:
        if a.dtype == np.bool_:
            initial: Any = not lowest
        else:
            info = np.iinfo(a.dtype)
            initial = info.min if lowest else info.max
        return fn(a, axis=_axes(axes), initial=initial)
    return rule


def _argmax(a: np.ndarray, *, axes: Any, index_dtype: Any) -> Optional[np.ndarray]:
    if not a.shape[axes[0] + 1]:
        return None  # (no element: no index)
    return np.argmax(a, axis=axes[0] + 1).astype(index_dtype)


# ``rule(out_vars, *per-step operands, **params)``: the op at every step (operands ``[T, *shape]``).
_STEPPED: dict[Any, Callable[..., Any]] = {
    lax.add_p: _elementwise(lambda a, b: a + b),
    lax.sub_p: _elementwise(lambda a, b: a - b),
    lax.mul_p: _elementwise(lambda a, b: a * b),
    lax.neg_p: _elementwise(lambda a: -a),
    lax.div_p: _divide(remainder=False),
    lax.rem_p: _divide(remainder=True),
    lax.max_p: _elementwise(np.maximum),
    lax.min_p: _elementwise(np.minimum),
    lax.and_p: _elementwise(lambda a, b: a & b),
    lax.or_p: _elementwise(lambda a, b: a | b),
    lax.xor_p: _elementwise(lambda a, b: a ^ b),
    lax.not_p: _elementwise(lambda a: ~a),
    lax.shift_left_p: _shift("left"),
    lax.shift_right_logical_p: _shift("logical"),
    lax.shift_right_arithmetic_p: _shift("arithmetic"),
    lax.eq_p: _elementwise(lambda a, b: a == b),
    lax.ne_p: _elementwise(lambda a, b: a != b),
    lax.lt_p: _elementwise(lambda a, b: a < b),
    lax.le_p: _elementwise(lambda a, b: a <= b),
    lax.gt_p: _elementwise(lambda a, b: a > b),
    lax.ge_p: _elementwise(lambda a, b: a >= b),
    lax.convert_element_type_p: _convert,
    lax.select_n_p: _select_n,
    lax.clamp_p: _clamp,
    lax.broadcast_in_dim_p: _stepped_broadcast,
    lax.reshape_p: _stepped_reshape,
    lax.squeeze_p: lambda a, *, dimensions: np.squeeze(a, tuple(d + 1 for d in dimensions)),
    lax.iota_p: _stepped_iota,
    lax.concatenate_p: lambda *xs, dimension: np.concatenate(xs, axis=dimension + 1),
    lax.copy_p: lambda a: a,
    lax.reduce_or_p: _bitwise(np.bitwise_or, np.any, ones=False),
    lax.reduce_and_p: _bitwise(np.bitwise_and, np.all, ones=True),
    lax.reduce_max_p: _extreme(np.max, lowest=True),
    lax.reduce_min_p: _extreme(np.min, lowest=False),
    lax.argmax_p: _argmax,
    record_p: functools.partial(merged, xp=np),
}
_CALLS = (jit_p, core.closed_call_p, custom_jvp_call_p)


# The 1-D gathers and scatters ``x.at[j]`` makes, evaluated once (``value``: ``length`` 1).
_ROWS = ((), (0,), (0,))


def _one_d(operand: np.ndarray, indices: np.ndarray) -> bool:
    return operand.shape[0] == 1 and operand.ndim == 2 and indices.ndim == 3 and indices.shape[2] == 1


def _gather(operand: np.ndarray, indices: np.ndarray, *, dimension_numbers: Any, slice_sizes: Any, mode: Any,
            fill_value: Any, **_: Any) -> Optional[np.ndarray]:
    d = dimension_numbers
    if ((d.offset_dims, d.collapsed_slice_dims, d.start_index_map) != _ROWS or d.operand_batching_dims
            or d.start_indices_batching_dims or tuple(slice_sizes) != (1,) or not _one_d(operand, indices)):
        return None
    op, n = operand[0], operand.shape[1]
    j = _indices(indices[0, :, 0], n)
    if j is None:
        return None
    inside = (j >= 0) & (j < n)
    got = op[np.clip(j, 0, n - 1)] if n else np.zeros(j.shape, op.dtype)
    if mode == GatherScatterMode.FILL_OR_DROP:
        if fill_value is None:
            return None
        got = np.where(inside, got, np.asarray(fill_value, op.dtype))
    elif mode not in (GatherScatterMode.CLIP, GatherScatterMode.PROMISE_IN_BOUNDS) or not n:
        return None
    return got[None]


def _scatter(combine: Optional[Any]) -> Callable[..., Optional[np.ndarray]]:
    def rule(operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, dimension_numbers: Any, mode: Any,
             **_: Any) -> Optional[np.ndarray]:
        d = dimension_numbers
        if ((d.update_window_dims, d.inserted_window_dims, d.scatter_dims_to_operand_dims) != _ROWS
                or d.operand_batching_dims or d.scatter_indices_batching_dims or not _one_d(operand, indices)
                or updates.shape != indices.shape[:2]):
            return None
        out, u, n = operand[0].copy(), updates[0], operand.shape[1]
        j = _indices(indices[0, :, 0], n)
        if j is None:
            return None
        inside = (j >= 0) & (j < n)
        if mode == GatherScatterMode.CLIP:
            j, inside = np.clip(j, 0, n - 1), np.full(j.shape, n > 0)
        elif mode != GatherScatterMode.FILL_OR_DROP and not inside.all():
            return None  # (out of bounds, promised not to be: left to XLA)
        j, u = j[inside], u[inside]
        if combine is None:
            if np.unique(j).size != j.size:
                return None  # (a slot set twice: XLA does not say which update wins)
            out[j] = u
        else:
            combine.at(out, j, u)
        return out[None]

    return rule


def _indices(x: np.ndarray, n: int) -> Optional[np.ndarray]:
    """Indices into a dimension of size ``n``, as ``int64``, when XLA's reading of them is
    plain: ``None`` when ``n`` does not fit their dtype (XLA bounds and clamps them in that
    dtype, where ``n - 1`` wraps: an ``int8`` index into 300 rows past 43 is dropped), when an
    unsigned one has its top bit set (XLA's implicit clamps read it as negative), or when one is
    past ``int32`` (a filling gather converts them to ``int32`` first)."""
    info = np.iinfo(x.dtype) if x.dtype != np.bool_ else None
    if info is None or n > info.max:
        return None
    if not x.size:
        return x.astype(np.int64)
    if info.kind == "u" and int(x.max()) >> (info.bits - 1):
        return None
    if int(x.max()) >= 2**31 or int(x.min()) < -2**31:
        return None
    return x.astype(np.int64)


def starts(x: np.ndarray, n: int, size: int = 1) -> Optional[np.ndarray]:
    """Where dynamic slices (or updates) of ``size`` along a dimension of ``n`` start, for start
    indices ``x``, as XLA clamps them into the dimension (``int64``); ``None`` when XLA's reading
    of ``x`` is not plain (see :func:`_indices`). A scan's rows written or read at known indices
    (``scan_rewrite``) are these, as the loop's own slices would take them."""
    j = _indices(x, n)
    return None if j is None else np.clip(j, 0, n - size)


def _dynamic_slice(operand: np.ndarray, *indices: np.ndarray, slice_sizes: Any) -> Optional[np.ndarray]:
    if operand.shape[0] != 1 or len(indices) != operand.ndim - 1:
        return None
    at = []
    for s, n, k in zip(indices, operand.shape[1:], slice_sizes, strict=True):
        start = starts(s, n, k)
        if start is None:
            return None
        at.append(slice(int(start[0]), int(start[0]) + k))
    return operand[(slice(None), *at)]


def _slot(flags: np.ndarray, record: np.ndarray, slot: np.ndarray, *, op: str) -> Optional[list[np.ndarray]]:
    if flags.shape[0] != 1 or flags.ndim != 2 or record.ndim != 2 or slot.shape != (1,) or slot[0] < 0:
        return None
    out_flags, out_record = slots.known_update(flags[0], record[0], int(slot[0]), op)
    return [out_flags[None], out_record[None]]


_STEPPED.update({
    slicing.gather_p: _gather,
    slicing.scatter_p: _scatter(None),
    slicing.scatter_min_p: _scatter(np.minimum),
    slicing.scatter_max_p: _scatter(np.maximum),
    slicing.scatter_add_p: _scatter(np.add),
    slicing.dynamic_slice_p: _dynamic_slice,
    slots.slot_p: _slot,
})
_MULTIPLE = {slots.slot_p}  # rules that give every result (the others give one)


def _exact(aval: Any) -> bool:
    """Integers and booleans of a static shape only: their NumPy ops are XLA's, bit for bit
    (NumPy's own integers: not ``int4`` and the like, whose ops are ``ml_dtypes``')."""
    return (isinstance(aval, core.ShapedArray) and core.is_constant_shape(aval.shape)
            and np.dtype(aval.dtype).kind in "iub")


def _eval(jaxpr: core.Jaxpr, consts: Any, args: list[np.ndarray], length: int) -> Optional[list[np.ndarray]]:
    """``jaxpr`` at every step (operands and results ``[T, *shape]``), or ``None``."""
    env: dict[core.Var, np.ndarray] = {}
    for v, c in zip(jaxpr.constvars, consts, strict=True):
        known = None if isinstance(c, core.Tracer) else value(c)
        if known is None:
            return None
        env[v] = _stepped(v, known, length)
    env.update(zip(jaxpr.invars, args, strict=True))
    return _run(jaxpr.eqns, jaxpr.outvars, env, length)


def _stepped(v: core.Atom, x: Any, length: int) -> np.ndarray:
    """A value fixed for the loop, the same at every step."""
    return np.broadcast_to(np.asarray(x, _dtype(v)), (length, *np.shape(x)))


def _run(eqns: Any, outvars: Any, env: dict[core.Var, np.ndarray], length: int) -> Optional[list[np.ndarray]]:
    """``eqns`` at every step, from ``env``; the values of ``outvars``, or ``None``."""
    def read(v: core.Atom) -> np.ndarray:
        return _stepped(v, v.val, length) if isinstance(v, core.Literal) else env[v]

    for eqn in eqns:
        if not all(_exact(v.aval) for v in [*eqn.invars, *eqn.outvars]):
            return None
        outs = _apply(eqn, [read(v) for v in eqn.invars], length)
        if outs is None:
            return None
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in outvars]


def _apply(eqn: Any, ins: list[np.ndarray], length: int) -> Optional[list[np.ndarray]]:
    """One equation (of a jaxpr, or the one that made a tracer) at every step, or ``None``."""
    if eqn.primitive in _CALLS:
        inner = _body(eqn)
        outs = _eval(inner.jaxpr, inner.consts, ins, length)
    elif eqn.primitive in _STEPPED:
        out = _STEPPED[eqn.primitive](*ins, **eqn.params)
        outs = out if out is None or eqn.primitive in _MULTIPLE else [out]
    else:
        return None
    if outs is None:
        return None
    done = []
    for v, x in zip(eqn.outvars, outs, strict=True):
        aval: Any = v.aval
        if np.shape(x) != (length, *aval.shape):
            return None
        done.append(np.asarray(x).astype(aval.dtype, copy=False))
    return done


def _shape(v: core.Atom) -> tuple[int, ...]:
    aval: Any = v.aval
    return aval.shape


def _dtype(v: core.Atom) -> Any:
    aval: Any = v.aval
    return aval.dtype


def per_step(slice_: tuple[core.JaxprEqn, ...], needed: tuple[core.Var, ...], counters: dict[int, core.Atom],
             closed: core.ClosedJaxpr, num_consts: int, num_carry: int, consts: Any, init: Any, xs: Any,
             length: int, reverse: bool, memo: Optional[dict[int, Any]] = None) -> Optional[dict[core.Var, np.ndarray]]:
    """The values ``needed`` (computed by the body's equations ``slice_``) at every step, in the
    order the loop runs, as ``[T, *shape]`` NumPy arrays, when they are known while tracing:
    computed from the body's consts, the scan's known consts, scanned inputs, counters that start
    at a known value and carries the body returns unchanged, by integer ops of ``_STEPPED``;
    else ``None``."""
    body = closed.jaxpr
    if not isinstance(length, int) or not all(_exact(v.aval) and length * int(np.prod(_shape(v))) <= LIMIT
                                              for v in needed):
        return None
    carry_out = body.outvars[:num_carry]
    used = {v for eqn in slice_ for v in eqn.invars if isinstance(v, core.Var)} | set(needed)
    produced = {v for eqn in slice_ for v in eqn.outvars}
    sources: dict[core.Var, np.ndarray] = {}
    with np.errstate(over="ignore"):  # (integers wrap, as XLA's do)
        for k, v in enumerate(body.invars):
            if v not in used or v in produced:
                continue
            got: Optional[np.ndarray] = None
            if k < num_consts:
                got = value(consts[k], memo)
                got = None if got is None else np.broadcast_to(got, (length, *got.shape))
            elif k < num_consts + num_carry:
                c = k - num_consts
                first = value(init[c], memo)
                if c in counters:
                    d = counters[c]
                    step = np.asarray(d.val) if isinstance(d, core.Literal) else value(consts[body.invars.index(d)], memo)
                    if first is not None and step is not None:  # (in the counter's dtype: it wraps)
                        dtype = first.dtype
                        got = first + np.arange(length).astype(dtype) * np.asarray(step).astype(dtype)
                elif carry_out[c] is v and first is not None:  # a carry the body returns as it received it
                    got = np.broadcast_to(first, (length, *first.shape))
            else:
                got = value(xs[k - num_consts - num_carry], memo)
                got = got[::-1] if got is not None and reverse else got
            aval: Any = v.aval
            if got is None or got.shape != (length, *aval.shape) or not _exact(aval):
                return None
            sources[v] = got.astype(aval.dtype, copy=False)
        env = dict(sources)
        for v, c in zip(body.constvars, closed.consts, strict=True):
            if v in used:
                known = value(c)
                if known is None:
                    return None
                env[v] = _stepped(v, known, length)
        outs = _run(slice_, needed, env, length)
    return None if outs is None else dict(zip(needed, outs, strict=True))
