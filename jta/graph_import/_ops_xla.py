"""XLA's dynamic slices as TensorFlow exposes them (``tensorflow.compiler.tf2xla.python.xla``): ``XlaDynamicSlice``
and ``XlaDynamicUpdateSlice``, the key/value-cache reads and writes of Hugging Face's TF generation code.

TensorFlow runs them through XLA even outside ``jit_compile``, so they have XLA's semantics, which are
``lax.dynamic_slice``'s and ``lax.dynamic_update_slice``'s: each start index is clamped into
``[0, dim - size]`` so that the slice fits (an index out of range is no error; a negative one reads or
writes from 0). The slice's sizes must be known (they are the output's shape); the start indices may be
computed at run time. Shapes that do not fit fail when the op is traced, with the text of TensorFlow's
kernel (``XlaDynamicUpdateSlice``) or of its MLIR legalization (``XlaDynamicSlice``, whose message
TensorFlow wraps in its legalization report: the core of it here).

TensorFlow registers no gradient for either op: a gradient that reaches their float inputs raises
``LookupError`` (:mod:`._no_gradient`), as the tape does.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ._nodes import Node
from ._ops import OPS, registrar, static_value
from ._ops_checks import dims, invalid, known_now

_reg = registrar(OPS)


def _starts(indices: Any, shape: tuple[int, ...], sizes: tuple[int, ...]) -> list[Any]:
    """The start indices clamped into ``[0, dim - size]``, as XLA clamps them: here, because ``lax`` first
    counts a negative index from the end, as Python does (known ones now: an int64 index beyond int32
    would wrap when JAX narrows it)."""
    high = np.subtract(shape, sizes)
    known = known_now(indices)
    if known is not None:
        return [np.int32(v) for v in np.clip(known.astype(np.int64), 0, high)]
    return list(jnp.clip(jnp.asarray(indices), 0, high.astype(np.int32)))


@_reg("XlaDynamicSlice")
def _dynamic_slice(node: Node, args: list[Any]) -> list[Any]:
    """The ``size_indices`` block of ``input`` at ``start_indices``, clamped to fit."""
    x, starts, sizes = args
    shape, rank = np.shape(x), np.ndim(x)
    if np.ndim(starts) != 1 or np.ndim(sizes) != 1:
        invalid(node, f"start_indices must be a vector with length equal to input rank, but input rank is {rank} "
                      f"and start_indices has shape [{dims(np.shape(starts))}]")
    size = [int(s) for s in static_value(node, sizes, "the slice's sizes")]
    if len(size) != np.shape(starts)[0]:
        invalid(node, f"has mismatched number of slice sizes ({len(size)}) and number of start indices "
                      f"({np.shape(starts)[0]})")
    if len(size) != rank:
        invalid(node, f"has mismatched number of slice sizes ({len(size)}) and rank of operand ({rank})")
    for axis, (s, d) in enumerate(zip(size, shape, strict=True)):
        if s < 0:
            invalid(node, f"has negative size index to dynamic slice: {s}")
        if s > d:
            invalid(node, f"has slice size {s} greater than dimension size {d} in dimension {axis} of operand")
    return [lax.dynamic_slice(jnp.asarray(x), _starts(starts, shape, tuple(size)), size)]


@_reg("XlaDynamicUpdateSlice")
def _dynamic_update_slice(node: Node, args: list[Any]) -> list[Any]:
    """``input`` with ``update`` written at ``indices``, clamped so that it fits."""
    x, update, indices = args
    shape, upd = np.shape(x), np.shape(update)
    if np.ndim(indices) != 1 or np.shape(indices)[0] != len(shape):
        invalid(node, "index must be a vector with length equal to the number of input dimensions")
    if len(upd) != len(shape):
        invalid(node, f"input and update must have the same rank, input shape is [{dims(shape)}]; "
                      f"update shape is [{dims(upd)}]")
    for u, d in zip(upd, shape, strict=True):
        if u > d:
            invalid(node, f"Update dim size {u} greater than dynamic slice dimension: {d}.")
    x = jnp.asarray(x)
    return [lax.dynamic_update_slice(x, jnp.asarray(update, x.dtype), _starts(indices, shape, upd))]
