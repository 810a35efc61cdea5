"""A slot's bookkeeping as one primitive, and the same for a whole loop's ops at once.

``jta_slot(flags, record, slot, op=...)`` is what one write or read at a traced index does to
an array's per-slot flags (``records.WRITTEN``, ``records.READ`` and the sticky error flags) and
to its error record: it sets the slot's flags and records the error they show, the first error
winning. Being one primitive, a loop body's bookkeeping is visible in the body's jaxpr, so the
functionalizer (``hoisting``) can take it out of the loop: :func:`replay` computes what the
loop's ops did to the flags, all steps at once, after the loop.

``op`` is ``"write"``, ``"add"`` (a gradient array's write: writes add up), ``"read"``
(marks the slot) or ``"read_clear"`` (marks it, and a second read is an error).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core
from jax._src.ad_util import Zero
from jax._src.interpreters import ad
from jax.interpreters import batching, mlir

from . import records
from .primitives import varying_alike

OPS = ("write", "add", "read", "read_clear")
slot_p = core.Primitive("jta_slot")
slot_p.multiple_results = True
# Elements up to which :func:`replay`'s scatter operands that depend on the shape only are NumPy
# constants of the program (no kernel per call) rather than computed (no constant to compile).
CONSTANT_LIMIT = 1 << 16


def update(flags: jax.Array, record: jax.Array, slot: Any, op: str) -> tuple[jax.Array, jax.Array]:
    """``(flags, record)`` after ``op`` at ``slot`` (``len(flags)`` or more: no slot, nothing
    changes), which must be in range: the range check is the caller's."""
    flags, record = slot_p.bind(*varying_alike(flags, record, jnp.asarray(slot, jnp.int32)), op=op)
    return flags, record


def flags_after(old: Any, op: str, xp: Any = jnp) -> Any:
    """A slot's flags after ``op``, from its flags before (``xp``: ``numpy`` for known flags)."""
    if op in ("write", "add"):
        return records.written_flags(old, aggregate=op == "add", xp=xp)
    return records.read_flags(old, clears=op == "read_clear", xp=xp)


def mark(flags: jax.Array, slot: Any, op: str) -> jax.Array:
    """``flags`` with slot ``slot``'s flags after ``op`` (no slot: unchanged)."""
    return flags.at[slot].set(flags_after(flags.at[slot].get(mode="fill", fill_value=0), op), mode="drop")


def _impl(flags: jax.Array, record: jax.Array, slot: jax.Array, *, op: str) -> list[jax.Array]:
    flags = mark(flags, slot, op)
    if op != "read":  # TensorFlow's first error is this op's: record it now, from the new flags
        # Read back from the updated flags, not reused from ``old``: a second reader of the old
        # flags makes XLA copy the whole flags vector in every step of a loop.
        record = records.record_slot_error(record, flags.at[slot].get(mode="fill", fill_value=0), slot)
    return [flags, record]


def known_update(flags: np.ndarray, record: np.ndarray, slot: int, op: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`update` in NumPy, for flags, record and slot known while tracing (``slot`` not
    negative: callers pass ``len(flags)`` for no slot)."""
    n = flags.shape[0]
    flags = flags.copy()
    if slot < n:
        flags[slot] = flags_after(flags[slot], op, xp=np)
    if op != "read":
        bits: Any = flags[slot] if slot < n else np.int32(0)
        code = int(records.slot_code(bits, xp=np))
        if code and record[0] == 0:
            record = np.zeros_like(record)
            record[0], record[1] = code, slot
    return flags, record


def _batch(args: Any, dims: Any, *, op: str) -> tuple[list[jax.Array], list[int]]:
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    args = [batching.bdim_at_front(a, d, size) for a, d in zip(args, dims, strict=True)]
    return jax.vmap(functools.partial(_impl, op=op))(*args), [0, 0]


def _jvp(primals: Any, tangents: Any, *, op: str) -> tuple[list[Any], list[Any]]:
    outs = slot_p.bind(*primals, op=op)
    return outs, [Zero(core.typeof(x).to_tangent_aval()) for x in outs]  # integers: no tangent


slot_p.def_impl(_impl)
slot_p.def_abstract_eval(lambda flags, record, slot, *, op: [flags.update(weak_type=False),
                                                             record.update(weak_type=False)])
mlir.register_lowering(slot_p, mlir.lower_fun(_impl, multiple_results=True))
batching.primitive_batchers[slot_p] = _batch
ad.primitive_jvps[slot_p] = _jvp


def replay(flags: Any, slots: Any, ops: tuple[str, ...], xp: Any = jnp) -> tuple[Any, Any]:
    """What ``update`` at ``slots[t, e]`` with ``ops[e]``, in row-major order, does to ``flags``,
    without a loop: ``(flags after them all, codes)``, where ``codes[t, e]`` is the error code
    that op records (0: none) *if no earlier op recorded one*. Only the first op with a code
    matters to a first-error-wins record, and its code is exact. O(T E + n), vectorised.

    An op's flags depend on the slot's flags before it: its flags before the loop, or'ed with the
    flags of the earlier ops on it. The slot was read before position ``p`` when its first read
    comes before ``p``, and written when its first op does (a read marks a slot written too).
    Its final error flags follow from its first and last ops of each kind, so one scatter-min
    of five positions per op (the last as a negated minimum) says everything: a few fused
    kernels, where every kernel outside the loop costs compile time. ``xp``: ``jax.numpy``, or
    ``numpy`` for flags and slots known while tracing (the same computation, made then)."""
    steps, per_step = slots.shape
    n = flags.shape[0]
    i32 = xp.int32
    j = slots.reshape(-1).astype(i32)
    valid = (j >= 0) & (j < n)
    count = j.shape[0]
    static = xp is np or (core.is_constant_dim(count) and (count + n) * 5 <= CONSTANT_LIMIT)
    op_of, keys, never = _positions(steps, per_step, ops, np if static else xp)
    is_write = op_of < OPS.index("read")
    first = (np if static else xp).full((n + 1, 5), never, np.int32)
    if xp is np:
        j = np.where(valid, j, n)  # n: no slot
        np.minimum.at(first, j, keys)
    else:
        # No slot (out of range): dropped by the scatter, read as row n by the gathers (its
        # values then matter to nothing: no code, no flags). Mapping it to n first would be a
        # kernel of its own, since the scatter's indices are materialized.
        first = jnp.asarray(first).at[j].min(keys, mode="drop", wrap_negative_indices=False)
        j = jnp.clip(j, 0, n)  # (fused into the gathers' consumers)
    p = xp.arange(count, dtype=i32)
    before = xp.append(flags, i32(0)).astype(i32)[j]  # the slot's flags before the loop
    mine = first[j]
    was_read = ((before & records.READ) != 0) | (mine[:, 1] < p)
    was_written = ((before & records.WRITTEN) != 0) | (mine[:, 0] < p)
    none = i32(0)
    own = (xp.where(is_write & was_read, i32(records.E_WRITE_AFTER_READ), none)
           | xp.where((op_of == OPS.index("write")) & was_written, i32(records.E_WRITTEN_TWICE), none)
           | xp.where((op_of == OPS.index("read_clear")) & was_read, i32(records.E_READ_CLEARED), none))
    # The code an op records: the first of its slot's error flags in ``SLOT_ERRORS``'s order.
    sticky = (before & records.ERROR_FLAGS) | own
    code = xp.where(valid & (op_of != OPS.index("read")), records.slot_code(sticky, xp=xp), 0)
    # Each slot's flags after the loop: an error bit is set when the last op that can set it
    # does (the slot's history only grows, so if any such op sets it, the last one does).
    first_op, first_read, last_write, last_forward, last_clear = (first[:n, k] for k in range(5))
    old = flags
    had_read, had_written = (old & records.READ) != 0, (old & records.WRITTEN) != 0
    read = had_read | (first_read < never)
    after_read = (last_write <= 0) & (had_read | (first_read < -last_write))
    twice = (last_forward <= 0) & (had_written | (first_op < -last_forward))
    cleared = (last_clear <= 0) & (had_read | (first_read < -last_clear))
    flags = (old | xp.where(first_op < never, i32(records.WRITTEN), none)
             | xp.where(read, i32(records.READ), none)
             | xp.where(after_read, i32(records.E_WRITE_AFTER_READ), none)
             | xp.where(twice, i32(records.E_WRITTEN_TWICE), none)
             | xp.where(cleared, i32(records.E_READ_CLEARED), none))
    return flags.astype(old.dtype), code.reshape(steps, per_step).astype(i32)


def _positions(steps: Any, per_step: int, ops: tuple[str, ...], xp: Any) -> tuple[Any, Any, Any]:
    """Per op position of a replay: its op's index in ``OPS``, the five scatter-min keys, and the
    position past them all. They depend on the shape only: in NumPy (``xp``) they enter the
    program as constants, where staged they are a kernel run on every call (XLA does not fold
    them)."""
    count = steps * per_step
    op_of = xp.broadcast_to(np.asarray([OPS.index(op) for op in ops], np.int32), (steps, per_step)).reshape(-1)
    p = xp.arange(count, dtype=xp.int32)
    never = xp.asarray(count if xp is np else core.dimension_as_value(count), xp.int32)
    is_read = op_of >= OPS.index("read")
    # Per slot: its first op, its first read, and (negated, 1: none) its last write of either
    # kind, its last forward write and its last clearing read.
    keys = xp.stack([p, xp.where(is_read, p, never), xp.where(~is_read, -p, 1),
                     xp.where(op_of == OPS.index("write"), -p, 1),
                     xp.where(op_of == OPS.index("read_clear"), -p, 1)], axis=1).astype(xp.int32)
    return op_of, keys, never
