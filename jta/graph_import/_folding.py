"""Constant folding: an op of small static inputs runs while tracing, as TensorFlow folds constants.

The importer keeps what it knows while tracing as NumPy values (shapes, axes, counts), since the ops
they feed need them static. Most ops compute on NumPy inputs with NumPy; an op whose code is JAX's (a
``TensorScatterUpdate`` of shapes, as ``take_along_axis`` builds) would hand a traced value on, and
what reads it refused as not static. :func:`folded` runs such an op now instead, and
:func:`folded_lists` a TensorList op of known lists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import jax
import numpy as np
from jax.core import Tracer

from ._nodes import Node

LARGEST = 4096  # the most elements an input or a result of a folded op has


def folded(op: Callable[[Node, list[Any]], list[Any]], node: Node, args: list[Any]) -> Optional[list[Any]]:
    """``op(node, args)`` computed now, its JAX results as NumPy, where every input is a NumPy value of at
    most :data:`LARGEST` elements; ``None`` for other inputs, or for a larger result (a constant of it
    would bloat the compiled program, which computes it instead)."""
    if not all(isinstance(a, (np.ndarray, np.generic)) and np.size(a) <= LARGEST for a in args):
        return None
    with jax.ensure_compile_time_eval():
        out = op(node, args)
    if any(isinstance(o, Tracer) or (isinstance(o, jax.Array) and o.size > LARGEST) for o in out):
        return None
    return [np.asarray(o) if isinstance(o, jax.Array) else o for o in out]


def _known(leaf: Any) -> bool:
    return not isinstance(leaf, Tracer) and np.size(leaf) <= LARGEST


def folded_lists(op: Callable[[Node, list[Any]], list[Any]], node: Node, args: list[Any]) -> Optional[list[Any]]:
    """A TensorList op of known, small inputs (lists of constants: ``tf.norm``'s ``map_fn`` over its axes)
    computed now, so that what reads its elements sees NumPy values, not traces; ``None`` otherwise. Its
    lists keep JAX arrays (their ops write with ``.at``), concrete ones."""
    if not all(_known(leaf) for leaf in jax.tree_util.tree_leaves(args)):
        return None
    with jax.ensure_compile_time_eval():
        out = op(node, args)
    if not all(_known(leaf) for leaf in jax.tree_util.tree_leaves(out)):
        return None
    return [np.asarray(o) if isinstance(o, jax.Array) else o for o in out]  # (an element, a stack: NumPy)
