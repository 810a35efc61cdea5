"""Vectors of TensorLists: ``tf.stack`` of list handles (a ``Pack``; ``Unpack`` gives them back), which
``TensorListPushBackBatch`` and ``TensorListConcatLists`` take (:mod:`jta.graph_import._lists` has the
single list's ops)."""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._lists import (
    LIST_OPS,
    VARIANT,
    TList,
    check_push,
    element_dtype,
    is_full,
    materialize,
    merge_shape,
    misuse,
    push_back,
    shape_text,
    tf_dtype_name,
)
from ._nodes import Node
from ._ops import registrar

__all__ = ["ListBatch"]

_reg = registrar(LIST_OPS)


@jax.tree_util.register_pytree_node_class
class ListBatch:
    """A vector of TensorLists (a ``Pack`` of list handles; ``Unpack`` gives them back)."""

    def __init__(self, lists: tuple[TList, ...]):
        self.lists = tuple(lists)

    def tree_flatten(self) -> tuple[tuple[TList, ...], None]:
        return self.lists, None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Any) -> ListBatch:
        return cls(tuple(children))

    def __repr__(self) -> str:
        return f"ListBatch({list(self.lists)!r})"


def _handles_shape(v: Any) -> str:
    return f"[{len(v.lists)}]" if isinstance(v, ListBatch) else "[]"


@_reg("TensorListPushBackBatch")
def _push_back_batch(node: Node, args: list[Any]) -> list[Any]:
    handles, tensor = args
    if not isinstance(handles, ListBatch):
        misuse(node, "Expected input_handles to be a vector, but saw shape: []")
    if np.ndim(tensor) < 1:
        misuse(node, "Expected tensor to be at least a vector, but saw shape: []")
    if np.shape(tensor)[0] != len(handles.lists):
        misuse(node, f"Expected tensor.shape[0] == input_handles.size, but saw {np.shape(tensor)[0]} vs. "
                      f"{len(handles.lists)}")
    out = []
    for b, lst in enumerate(handles.lists):
        if lst.dtype == VARIANT:
            misuse(node, f"Invalid data type at index {b}; op elements {tf_dtype_name(np.asarray(tensor).dtype)} but "
                          "list elements variant")
        check_push(node, TList(lst.items, lst.length, lst.dtype, lst.shape, lst.parts), tensor[b], str(b))
        # (TensorFlow's batched push does not check max_num_elements)
        out.append(push_back(node, [TList(lst.items, lst.length, lst.dtype, lst.shape, lst.parts, lst.const,
                                           lst.rows_hint), tensor[b]])[0])
        out[-1].limit = lst.limit
    return [ListBatch(tuple(out))]


@_reg("TensorListConcatLists")
def _concat_lists(node: Node, args: list[Any]) -> list[Any]:
    a, b = args
    if isinstance(a, ListBatch) != isinstance(b, ListBatch) or (
            isinstance(a, ListBatch) and len(a.lists) != len(b.lists)):
        misuse(node, f"Incompatible input TensorList tensor shapes: {_handles_shape(a)} vs. {_handles_shape(b)}")
    if not isinstance(a, ListBatch):
        return [_concat_two(node, a, b, 0)]
    return [ListBatch(tuple(_concat_two(node, x, y, k) for k, (x, y) in enumerate(zip(a.lists, b.lists,
                                                                                   strict=True))))]


def _concat_two(node: Node, a: TList, b: TList, k: int) -> TList:
    """The elements of ``a`` then those of ``b`` (TensorFlow's checks: dtypes, identical element shapes)."""
    want = element_dtype(node)
    for name, lst in (("input_a", a), ("input_b", b)):
        if lst.dtype != want:
            misuse(node, f"{name}[{k}].dtype != element_dtype.  Saw: {_tf_dtype_any(lst.dtype)} vs. "
                          f"{_tf_dtype_any(want)}")
    if a.shape != b.shape:
        misuse(node, f"input_a and input_b TensorList element shapes are not identical at index {k}.  Saw "
                      f"{shape_text(a.shape)} vs. {shape_text(b.shape)}")
    if a.static and b.static:
        if a.length == 0 and a.items is None and a.parts is None:
            return TList(b.items, b.length, b.dtype, b.shape, b.parts, None, limit=a.limit)
        if (a.items is None or b.items is None) and (a.parts is not None or b.parts is not None or
                                                     a.length == 0 or b.length == 0):
            pa, pb = _as_parts(node, a), _as_parts(node, b)
            if pa is not None and pb is not None:
                return TList(None, a.length + b.length, a.dtype, a.shape, (*pa, *pb), limit=a.limit)
        shape = merge_shape(a.element_shape(), b.element_shape())
        if a.items is None and b.items is None and not is_full(shape):
            return TList(None, a.length + b.length, a.dtype, a.shape, limit=a.limit)
        xa, xb = materialize(a, node, a.length, shape), materialize(b, node, b.length, shape)
        items = jnp.concatenate([xa.items[:a.length], xb.items[:b.length]])
        return TList(items, a.length + b.length, a.dtype, a.shape, limit=a.limit)
    # a run-time length (inside a loop): b's buffer placed after a's length, in a buffer of both sizes
    shape = merge_shape(a.element_shape(), b.element_shape())
    xa = materialize(a, node, a.length if a.static else 0, shape)
    xb = materialize(b, node, b.length if b.static else 0, shape)
    rows_a, rows_b = xa.items.shape[0], xb.items.shape[0]
    items = jnp.zeros((rows_a + rows_b, *xa.items.shape[1:]), a.dtype).at[:rows_a].set(xa.items)
    keep = (jnp.arange(rows_a) < a.length).reshape((-1,) + (1,) * (items.ndim - 1))
    items = items.at[:rows_a].set(jnp.where(keep, xa.items, 0))
    items = jax.lax.dynamic_update_slice_in_dim(items, xb.items, jnp.asarray(a.length, jnp.int32), 0)
    length = jnp.asarray(a.length, jnp.int32) + jnp.asarray(b.length, jnp.int32)
    return TList(items, length, a.dtype, a.shape, limit=a.limit)


def _as_parts(node: Node, lst: TList) -> Optional[tuple[Any, ...]]:
    """A static list's elements one by one (an unset one None; the result None for a list of lists
    whose elements are unset)."""
    if lst.parts is not None:
        return lst.parts
    if lst.length == 0:
        return ()
    if lst.items is None:
        return (None,) * lst.length if lst.dtype != VARIANT else None
    return tuple(lst.items[k] for k in range(lst.length))


def _tf_dtype_any(dtype: Any) -> str:
    return "variant" if dtype == VARIANT else tf_dtype_name(dtype)
