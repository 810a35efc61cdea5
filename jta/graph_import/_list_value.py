"""A TensorList value (:class:`TList`) and what its shapes mean, apart from the ops on it
(:mod:`jta.graph_import._lists`).

A list keeps its elements in one buffer (``items``, where they share a shape) or, with a static
length, one by one (``parts``), ``None`` marking an element never set: TensorFlow's list gives each
element its own shape, and an unset one reads as zeros of the shape the declared element shape and
the set elements merge to (:func:`hole_shape`), or fails with TensorFlow's text.
"""

from __future__ import annotations

from typing import Any, NoReturn, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .._delivery import value_ops
from ._messages import GraphError
from ._nodes import Node
from ._ops import is_static, static_value
from ._ops_checks import invalid, shape_text

__all__ = ["VARIANT", "TList"]


@jax.tree_util.register_pytree_node_class
class TList:
    """One TensorList value (a pytree: ``items`` and ``length`` are its leaves)."""

    def __init__(self, items: Any, length: Any, dtype: Any, shape: Optional[tuple[Optional[int], ...]],
                 parts: Optional[tuple[Any, ...]] = None, const: Any = None, rows_hint: Optional[int] = None,
                 limit: Optional[int] = None, plan: Optional[tuple[int, int, int]] = None):
        self.items, self.length, self.dtype, self.shape, self.parts = items, length, dtype, shape, parts
        # ``rows_hint``: the buffer's rows once it exists, for a list without one yet whose length is only
        # known at run time under a static bound (``TensorListReserve`` of ``tf.minimum(n, c)`` elements
        # of an unknown shape)
        self.rows_hint = rows_hint
        self.limit = limit  # ``max_num_elements`` of an EmptyTensorList (None: no limit); a push past it fails
        # ``const``: what is known of every element while tracing: that it is one static value (a key of
        # it: a tape's accumulator of an element shape or a length pushed in each forward step pops it
        # static in the gradient loop, where it sizes a TensorListReserve), or :class:`AtMost` a bound (a
        # tape's accumulator of run-time lengths under a static bound, which sizes it there)
        self.const = const
        # ``plan``: ``(number, base, per)`` for a buffer of ``base + per * rows`` elements, ``rows`` the
        # plan's number ``number`` (:mod:`jta._core.capacities`), for a list that a loop without a bound
        # grows: a write past them makes jta.checked grow them
        self.plan = plan

    def tree_flatten(self) -> tuple[tuple[Any, ...], Any]:
        # A static length is part of the structure (it stays a Python int through jax.eval_shape).
        if isinstance(self.length, int):
            return (self.items, self.parts), (self.dtype, self.shape, self.length, self.const, self.rows_hint,
                                               self.limit, self.plan)
        return (self.items, self.length, self.parts), (self.dtype, self.shape, None, self.const, self.rows_hint,
                                                       self.limit, self.plan)

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Any) -> TList:
        dtype, shape, length, const, rows_hint, limit, plan = aux
        if length is not None:
            return cls(children[0], length, dtype, shape, children[1], const, rows_hint, limit, plan)
        return cls(children[0], children[1], dtype, shape, children[2], const, rows_hint, limit, plan)

    @property
    def static(self) -> bool:
        return isinstance(self.length, int)

    def element_shape(self) -> Optional[tuple[Optional[int], ...]]:
        """The elements' shape: the buffer's where there is one, or the one shape the set elements kept one
        by one share (a list's representation does not change what it reports), else the declared one."""
        if self.items is not None and self.dtype != VARIANT:
            return tuple(self.items.shape[1:])
        shapes = {tuple(p.shape) for p in self.parts or () if p is not None} if self.dtype != VARIANT else set()
        return next(iter(shapes)) if len(shapes) == 1 else self.shape

    def traced(self) -> TList:
        """This list with its length a JAX value (a loop carry's)."""
        return TList(self.items, jnp.asarray(self.length, jnp.int32), self.dtype, self.shape, self.parts, self.const,
                     self.rows_hint, self.limit, self.plan)

    def __repr__(self) -> str:
        shape = None if self.items is None else jax.tree_util.tree_map(np.shape, self.items)
        return f"TList(length={self.length}, dtype={self.dtype}, items={shape}, shape={self.shape})"



VARIANT = "variant"  # the element dtype of a list of lists

def misuse(node: Node, error: str) -> NoReturn:
    invalid(node, error)



def is_full(shape: Optional[tuple[Optional[int], ...]]) -> bool:
    return shape is not None and all(d is not None for d in shape)


def merge_shape(a: Optional[tuple[Optional[int], ...]], b: Optional[tuple[Optional[int], ...]]) -> Any:
    if a is None or b is None:
        return b if a is None else a
    return tuple(x if x is not None else y for x, y in zip(a, b, strict=False)) if len(a) == len(b) else a



def merged_shape(node: Node, declared: Any, shape: Any) -> Any:
    """An op's ``element_shape`` input merged with the list's ``shape`` (TensorFlow's
    ``GetElementShapeFromInput``): they must agree where both are known."""
    return merge_checked(node, declared, shape)


def merge_checked(node: Node, a: Any, b: Any) -> Any:
    """``PartialTensorShape::MergeWith``: shapes ``a`` and ``b`` (``None``: unknown rank) merged, with
    TensorFlow's texts where their ranks or known dimensions differ."""
    if a is not None and b is not None:
        if len(a) != len(b):
            misuse(node, f"PartialTensorShape: Incompatible ranks during merge: {len(a)} vs. {len(b)}")
        if any(x != y for x, y in zip(a, b, strict=True) if x is not None and y is not None):
            misuse(node, f"PartialTensorShape: Incompatible shapes during merge: {shape_text(a)} vs. {shape_text(b)}")
    return merge_shape(a, b)


def split_offsets(node: Node, lengths: Any, size: int) -> np.ndarray:
    """Where ``TensorListSplit``'s pieces start (and the last ends), after its kernel's checks in order:
    each length non-negative and within the tensor, and the tensor used up."""
    end = 0
    for length in np.reshape(lengths, -1).tolist():
        if length < 0:
            misuse(node, f"Invalid value in lengths: {length}")
        if end + length > size:
            misuse(node, f"Attempting to slice [{end}, {end + length}] from tensor with length {size}")
        end += length
    if end != size:
        misuse(node, f"Unused values in tensor. Length of tensor: {size} Values used: {end}")
    return np.concatenate([[0], np.cumsum(lengths)]).astype(int)


def set_shapes(parts: tuple[Any, ...]) -> set[tuple[int, ...]]:
    """The shapes of a list's set elements."""
    return {tuple(p.shape) for p in parts if p is not None}


def admits(shape: Optional[tuple[Optional[int], ...]], dims: tuple[int, ...]) -> bool:
    """Whether a (partial) element shape admits an element of shape ``dims`` (unknown rank: any)."""
    return shape is None or (len(shape) == len(dims) and all(d is None or d == e for d, e in zip(shape, dims, strict=True)))


def value_key(v: Any) -> Any:
    """A static value as a hashable key (its dtype, shape and bytes)."""
    v = np.asarray(v)
    return v.dtype.str, v.shape, v.tobytes()


def from_key(key: Any) -> np.ndarray:
    """The static value of a :func:`value_key`."""
    dtype, shape, data = key
    return np.frombuffer(data, np.dtype(dtype)).reshape(shape).copy()


def hole_shape(node: Node, lst: TList, declared: Any = None) -> Optional[tuple[int, ...]]:
    """The shape an unset element of ``lst`` (one by one) reads as: the declared element shape merged with
    the set elements' (TensorFlow merges them, and fails where they disagree); None where it stays unknown."""
    shape = merge_shape(declared, lst.shape)
    for part in lst.parts or ():  # in order, as TensorFlow merges them
        if part is None:
            continue
        shape = merge_checked(node, shape, tuple(part.shape))
    return shape if is_full(shape) else None


def hole(node: Node, lst: TList, declared: Any = None) -> jax.Array:
    """What an unset element of ``lst`` (one by one) reads as: zeros of :func:`hole_shape`."""
    shape = hole_shape(node, lst, declared)
    if shape is None:
        misuse(node, "Trying to read an uninitialized tensor but element_shape is not fully defined: "
                     f"{shape_text(merge_shape(declared, lst.shape))} and no list element is set.")
    return jnp.zeros(shape, lst.dtype)


def unparts(lst: TList, node: Node, declared: Any = None) -> TList:
    """``lst`` (one by one) as a buffer: its elements must agree in shape."""
    parts = lst.parts or ()
    shapes = set_shapes(parts)
    if len(shapes) > 1:
        GraphError.TF2_LOOP.raise_(node=node.name, op=node.op, what=(
            f"the list holds elements of different shapes {sorted(shapes)} (from TensorListSplit or writes of "
            "different shapes), which only TensorListConcat, TensorListGetItem and TensorListLength read here"))
    if not shapes:  # nothing set: the buffer waits for a shape, as a list nothing was written to
        return TList(None, lst.length, lst.dtype, lst.shape, limit=lst.limit)
    parts = tuple(hole(node, lst, declared) if p is None else p for p in parts)
    return TList(jnp.stack(parts), lst.length, lst.dtype, lst.shape, limit=lst.limit)


def elements(lst: TList) -> Optional[tuple[Any, ...]]:
    """A static list's elements one by one where it keeps them so (``parts``), or where none is set yet
    and their shape is not fully known (all unset); else None (a buffer, or a run-time length)."""
    if lst.parts is not None:
        return lst.parts
    if lst.static and lst.items is None and lst.dtype != VARIANT and not is_full(lst.shape):
        return (None,) * lst.length
    return None


def one_by_one(lst: TList) -> bool:
    """Whether a write keeps ``lst``'s elements one by one: the length and the index are static and the
    element shape is not fully known (so elements may differ in shape, as in TensorFlow)."""
    return lst.dtype != VARIANT and lst.static and (lst.parts is not None or (
        lst.items is None and not is_full(lst.shape)))



def concat_pieces(node: Node, lst: TList, shape: Any, leading: Any) -> list[Any]:
    """A list's elements one by one for a concat: an unset one is zeros of ``leading_dims``' rows for it
    (``TensorListConcatV2``; a split's gradient gives the pieces' lengths) and the element shape's other
    dimensions, or of the shape the set elements agree on."""
    leading = () if leading is None else np.atleast_1d(static_value(node, leading, "leading_dims"))
    pieces = []
    inner = None if shape is None else tuple(shape[1:])  # (the elements' dimensions after the first, merged)
    for k, p in enumerate(lst.parts or ()):
        if p is None and k < len(leading):
            rest = None if shape is None else tuple(shape[1:])
            for other in sorted(set_shapes(lst.parts or ())):
                rest = merge_shape(rest, other[1:])
            if rest is None or not is_full(rest):
                misuse(node, "Trying to read an uninitialized tensor but element_shape is not fully defined: "
                             f"{shape_text(shape)} and no list element is set.")
            p = jnp.zeros((int(leading[k]), *rest), lst.dtype)
        elif p is None:
            if len(set_shapes(lst.parts or ())) > 1 or hole_shape(node, lst, shape) is None:
                misuse(node, f"List contains uninitialized tensor at index {k} but leading_dims has only "
                             f"{len(leading)} elements.")
            p = hole(node, lst, shape)
        if p.ndim < 1:
            misuse(node, "Concat requires elements to be at least vectors, found scalars instead.")
        inner = merge_checked(node, inner, tuple(p.shape[1:]))
        pieces.append(p)
    return pieces



def add_parts(node: Node, lists: list[TList]) -> TList:
    """The sum of static lists of one length, one of them element by element: TensorFlow adds the set
    elements (an unset one counts as zeros) and fails where two set ones differ in shape. A buffer's row of
    another shape than a set element is one that was never set (a gradient list a read of one piece of a
    split sets)."""
    parts: list[Any] = [None] * lists[0].length
    for lst in lists:
        for k in range(len(parts)):
            other = lst.parts[k] if lst.parts is not None else lst.items[k]
            if other is None or parts[k] is None:
                parts[k] = other if parts[k] is None else parts[k]
            elif tuple(other.shape) == tuple(parts[k].shape):
                parts[k] = parts[k] + other
            elif lst.parts is not None:
                incompatible(node, parts[k].shape, other.shape)
    first = lists[0]
    return TList(None, first.length, first.dtype, first.shape, tuple(parts), limit=first.limit)


def incompatible(node: Node, a: Any, b: Any) -> None:
    misuse(node, f"Trying to add two tensors with incompatible element shapes. One is {shape_text(a)} and the other "
                 f"is {shape_text(b)}")



def rows(items: Any) -> int:
    """The capacity of a buffer (of arrays, or of lists of one structure); 0 where it has no leaves."""
    leaves = jax.tree_util.tree_leaves(items)
    return int(leaves[0].shape[0]) if leaves else 0


def check(node: Node, bad: Any, message: GraphError, *fields: Any, plan: Optional[tuple[int, int, int]] = None
           ) -> None:
    """TensorFlow's check of an index or a length: raised now when static or concrete, else
    reported from compiled code through jta's error channel (never a silently clamped index).
    Compute ``bad`` with NumPy from values known while tracing (:func:`index_of`): then nothing is
    staged into the program. ``plan``: the check is of a buffer that ``jta.checked``'s plan sizes
    (:class:`TList`'s ``plan``), which grows it to hold element ``fields[0]`` and runs again."""
    extra = {"op": node.op}
    if plan is not None:
        extra.update(zip(("grows", "base", "per"), map(str, plan), strict=True))
    value_ops.report(node.name, bad, message, *fields, extra=extra, learns=plan is not None)


def index_of(index: Any) -> Any:
    """``index`` as an int32 scalar: NumPy when it is known while tracing, so that the checks on it
    are decided then."""
    i = static_int(index)
    return np.int32(i) if i is not None else jnp.asarray(index, jnp.int32)


def static_int(v: Any) -> Optional[int]:
    if isinstance(v, int) or is_static(v):
        return int(v)
    if isinstance(v, jax.Array) and not isinstance(v, Tracer):
        return int(v)
    return None
