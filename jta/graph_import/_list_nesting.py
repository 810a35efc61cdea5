"""Lists of lists: TensorLists whose elements are TensorLists (or optionals), as the tape's
accumulators of an inner loop's lists (pushed) and pfor's vectorized loops (reserved, then set) keep
them. The elements are held one by one (``parts``) where the length and the indices are static, else
as one buffer of their leaves, stacked (``items``), which needs every element of one structure.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._list_value import TList, check, from_key, index_of, misuse, rows, static_int, value_key
from ._messages import GraphError
from ._nodes import Node
from ._ops import is_static


def materialize_lists(lst: TList, capacity: int, template: Any) -> TList:
    """A list of lists with room for ``capacity`` elements (``template``: an element buffer's abstract value)."""
    if lst.parts is not None:
        leaves = [jax.tree_util.tree_leaves(p) for p in lst.parts]
        if len({jax.tree_util.tree_structure(p) for p in lst.parts}) > 1 or any(
                len({np.shape(x) for x in same}) > 1 for same in zip(*leaves, strict=True)):
            GraphError.TF2_LOOP.raise_(node="a list of lists", op="TensorListPushBack", what=(
                "its lists differ in structure or shapes (inner loops of different lengths, the rows of a mask "
                "that differ between steps), so it cannot be a loop's carry."))
        stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *lst.parts) if lst.parts else None
        lst = TList(stacked, lst.length, lst.dtype, lst.shape, limit=lst.limit)
    items = lst.items if lst.items is not None else template
    if items is None:
        return lst
    have = 0 if lst.items is None else rows(items)
    if have >= capacity and lst.items is not None:
        return lst

    def grow(leaf: Any) -> Any:
        pad = jnp.zeros((capacity - have, *leaf.shape[1:]), leaf.dtype)
        return pad if lst.items is None else jnp.concatenate([leaf, pad])
    return TList(jax.tree_util.tree_map(grow, items), lst.length, lst.dtype, lst.shape, limit=lst.limit)


def set_list(node: Node, lst: TList, index: Any, item: Any) -> TList:
    """Element ``index`` of a list of lists (pfor's, reserved) set: one by one where the index and the
    length are static, else in a buffer of the lists' leaves, stacked."""
    i = static_int(index)
    if i is not None and lst.parts is not None and lst.static:
        check(node, i < 0 or i >= lst.length, GraphError.LIST_MODIFY, i, lst.length, 0)
        parts = list(lst.parts)
        parts[i] = item
        return TList(None, lst.length, lst.dtype, lst.shape, tuple(parts), limit=lst.limit)
    if lst.items is None and lst.parts is not None and any(p is not None for p in lst.parts):
        if not all(p is not None for p in lst.parts):
            GraphError.LIST_CAPACITY.raise_(node=node.name, op=node.op, what=(
                "a list of lists with unset elements is written at an index only known at run time."))
        lst = materialize_lists(lst, lst.length, None)
    items = lst.items
    if items is None:  # the buffer of a reserved list, from the first list written
        count = lst.length if lst.static else lst.rows_hint
        if count is None:
            GraphError.LIST_CAPACITY.raise_(node=node.name, op=node.op, what=(
                "a list of lists of a run-time length is written before its buffer was sized."))
        items = jax.tree_util.tree_map(lambda e: jnp.zeros((count, *jnp.shape(e)), jnp.asarray(e).dtype), item)
    elif jax.tree_util.tree_structure(items) != jax.tree_util.tree_structure(item):
        GraphError.TF2_LOOP.raise_(node=node.name, op=node.op, what=(
            f"the lists set into a list of lists differ in structure ({items!r} and {item!r})."))
    at = index_of(index)
    check(node, (at < 0) | (at >= lst.length), GraphError.LIST_MODIFY, at, lst.length, 0)
    if jax.tree_util.tree_leaves(items):  # (lists of no leaves, unset ones of an unknown shape, hold no rows)
        check(node, at >= rows(items), GraphError.LIST_BEYOND_CAPACITY, at, rows(items), 0, plan=lst.plan)
    items = jax.tree_util.tree_map(lambda b, e: b.at[at].set(jnp.asarray(e).astype(b.dtype)), items, item)
    return TList(items, lst.length, lst.dtype, lst.shape, limit=lst.limit, plan=lst.plan)


def push_list(node: Node, lst: TList, item: Any) -> TList:
    if isinstance(item, (np.ndarray, np.generic, jax.Array)):  # elements are lists or optionals
        misuse(node, f"Tried to push a tensor into a list of variants: {item!r}")
    if lst.items is not None and jax.tree_util.tree_structure(lst.items) != jax.tree_util.tree_structure(item):
        GraphError.TF2_LOOP.raise_(node=node.name, op=node.op, what=(
            f"the lists pushed into a list of lists differ in structure ({lst.items!r} and {item!r})."))
    if lst.static and lst.items is None:
        parts = lst.parts or ()
        if len(parts) != lst.length:
            GraphError.TF2_LOOP.raise_(node=node.name, op=node.op, what="a list of lists with unset elements.")
        return TList(None, lst.length + 1, lst.dtype, lst.shape, (*parts, item), limit=lst.limit)
    one = jax.tree_util.tree_map(lambda e: jnp.asarray(e)[None], item)
    if lst.static:
        if rows(lst.items) > lst.length:
            items = jax.tree_util.tree_map(lambda b, e: b.at[lst.length].set(e[0]), lst.items, one)
        else:
            items = jax.tree_util.tree_map(lambda b, e: jnp.concatenate([b[:lst.length], e]), lst.items, one)
        return TList(items, lst.length + 1, lst.dtype, lst.shape, limit=lst.limit)
    if lst.items is None:
        GraphError.LIST_CAPACITY.raise_(node=node.name, op=node.op, what="a list of lists is pushed where its "
                                        "length is only known at run time, before its buffer was sized.")
    if lst.plan is not None:  # a buffer jta.checked's plan sizes (the loop sized the others for all its steps)
        check(node, lst.length >= rows(lst.items), GraphError.LIST_BEYOND_CAPACITY, lst.length, rows(lst.items), 0,
               plan=lst.plan)
    items = jax.tree_util.tree_map(lambda b, e: b.at[lst.length].set(e[0].astype(b.dtype)), lst.items, one)
    return TList(items, lst.length + 1, lst.dtype, lst.shape, limit=lst.limit, plan=lst.plan)


@dataclasses.dataclass(frozen=True)
class LeafConsts:
    """A list of optionals' ``const``: per leaf of its elements, the static value (a ``value_key``) every
    element pushed has there, else None. A cond's optionals carry its branch's intermediates to the
    gradient, some of them static (pfor's transpose permutations): a loop's accumulator of them keeps
    them static, as a list of tensors keeps a static element (:class:`TList`'s ``const``)."""

    keys: tuple[Any, ...]


def pushed_consts(lst: TList, item: Any) -> Optional[LeafConsts]:
    """``lst``'s :class:`LeafConsts` after pushing ``item`` (None: no leaf static in every element)."""
    if isinstance(item, TList):
        return None
    keys = tuple(value_key(x) if is_static(x) else None for x in jax.tree_util.tree_leaves(item))
    if not (lst.static and lst.length == 0):  # (agreeing with the elements before)
        old = lst.const
        if not isinstance(old, LeafConsts) or len(old.keys) != len(keys):
            return None
        keys = tuple(k if k == o else None for k, o in zip(keys, old.keys, strict=True))
    return LeafConsts(keys) if any(k is not None for k in keys) else None


def with_consts(lst: TList, element: Any) -> Any:
    """An ``element`` read from ``lst``, its leaves static where every element's are."""
    if not isinstance(lst.const, LeafConsts):
        return element
    leaves, tree = jax.tree_util.tree_flatten(element)
    if len(leaves) != len(lst.const.keys):
        return element
    return jax.tree_util.tree_unflatten(tree, [
        leaf if key is None else from_key(key)
        for leaf, key in zip(leaves, lst.const.keys, strict=True)])
