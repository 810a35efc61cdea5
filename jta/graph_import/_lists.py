"""TF2's TensorList ops as JAX values: a fixed-capacity buffer and a length.

A ``tf.TensorArray`` inside a ``tf.function`` (and every accumulator of a ``GradientTape`` through
a loop) is a *TensorList*: a value, not a resource. It is not run on jta's ``TensorArray``
machinery (:mod:`jta.raw_ops`) on purpose: that machinery exists for ``TensorArrayV3``'s resource
semantics (write-once elements, clear-after-read, the gradient array's flow chaining) and its error
records, none of which a TensorList has — a list may be overwritten, read any number of times, and
is passed by value through ``While``/``If`` like any tensor. A plain buffer is the whole of it:

* ``items``: ``(capacity, *element_shape)``, or None while no element has been set and the
  element shape is not fully known (TensorFlow reads unset elements as zeros only where the shape
  is known, and so does this);
* ``length``: a Python ``int`` where it is known while tracing (outside loops, and after a loop
  whose trip count is static), else a traced ``int32`` (inside a loop, or after one the data ends);
* ``parts``: the elements one by one, where the length is static and they may differ in shape
  (``TensorListSplit`` into ragged pieces, pushes, writes into a list whose element shape is not
  fully known, as ``TensorArray(infer_shape=False)`` and the tape's gradient lists of a split make);
  ``None`` marks an element never set, which reads as zeros of the shape the set ones agree on.

Outside loops a list grows by concatenation (lengths are static); inside a loop the loop sizes the
buffer first (:mod:`jta.graph_import._tf2_loops`) and a write lands in place. Lists of lists (the
tape's accumulators of inner lists, pfor's) are :mod:`jta.graph_import._list_nesting`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._core import capacities
from ._list_nesting import materialize_lists, push_list, pushed_consts, set_list, with_consts
from ._list_value import (
    VARIANT,
    TList,
    add_parts,
    admits,
    check,
    concat_pieces,
    elements,
    from_key,
    hole,
    hole_shape,
    incompatible,
    index_of,
    is_full,
    merge_shape,
    merged_shape,
    misuse,
    one_by_one,
    rows,
    shape_text,
    split_offsets,
    static_int,
    unparts,
    value_key,
)
from ._messages import GraphError
from ._nodes import Node
from ._ops import is_static, learned_value, registrar, static_value
from ._ops_checks import known_now

__all__ = ["LIST_OPS", "AtMost", "TList"]


LIST_OPS: dict[str, Callable[[Node, list[Any]], list[Any]]] = {}
_reg = registrar(LIST_OPS)


def _first_out_of_range(indices: Any, size: Any) -> tuple[Any, Any]:
    """Whether any of ``indices`` is outside ``[0, size)``, and the first such (TF's kernels stop there)."""
    xp = np if is_static(indices) and static_int(size) is not None else jnp
    indices = xp.atleast_1d(xp.asarray(indices, np.int32))
    bad = (indices < 0) | (indices >= size)
    return xp.any(bad), indices[xp.argmax(bad)] if indices.size else np.int32(0)


def _decl_shape(node: Node, v: Any) -> Optional[tuple[Optional[int], ...]]:
    """An ``element_shape`` input: ``-1`` (unknown rank) or a vector with ``-1`` for unknown dims."""
    v = np.asarray(static_value(node, v, "the element shape"))
    for d in np.reshape(v, -1).tolist():  # (TensorFlow's TensorShapeFromTensor)
        if d < -1:
            misuse(node, f"Dimension {d} must be >= -1")
    if v.ndim == 0:
        return None
    return tuple(None if int(d) < 0 else int(d) for d in v)


def element_dtype(node: Node) -> Any:
    """The list's element dtype (JAX's width for it), or :data:`VARIANT` for a list of lists; a list of
    resource handles or strings is refused (``GraphError.TF2_UNSUPPORTED``)."""
    dtype = node.attr("element_dtype")
    if dtype == VARIANT:
        return VARIANT
    if isinstance(dtype, np.dtype):
        return jax.dtypes.canonicalize_dtype(dtype)
    why = ("a list of resource handles: tf.vectorized_map falls back to a tf.while_loop over the batch (when "
           "pfor cannot vectorize an op of fn, such as a tf.while_loop reading a variable) and keeps the "
           "variable's handle in such a list. The ways out: read the variable outside fn and pass its value "
           "in (tf.vectorized_map(lambda a: fn(a, w_value), x)), or use tf.map_fn, which jta runs as a loop"
           if dtype == "resource" else f"jta's lists hold arrays, not {dtype}s")
    GraphError.TF2_UNSUPPORTED.raise_(items=f"  - node {node.name} ({node.op}): a TensorList of element dtype "
                                            f"{dtype}, {why}")


def materialize(lst: TList, node: Node, capacity: int, shape: Any = None) -> TList:
    """``lst`` with a buffer of at least ``capacity`` rows (unset rows zeros): needs the element shape."""
    if lst.dtype == VARIANT:
        return materialize_lists(lst, capacity, shape)
    if lst.parts is not None:
        lst = unparts(lst, node, shape)
    shape = merge_shape(lst.element_shape(), shape)
    if lst.items is None:
        if not is_full(shape):
            misuse(node, "Tried to stack elements of an empty list with non-fully-defined element_shape: "
                          f"{shape_text(shape)}")
        capacity = max(capacity, lst.rows_hint or 0)
        return TList(jnp.zeros((capacity, *shape), lst.dtype), lst.length, lst.dtype, lst.shape, limit=lst.limit)
    have = lst.items.shape[0]
    if have >= capacity:
        return lst
    pad = jnp.zeros((capacity - have, *lst.items.shape[1:]), lst.items.dtype)
    return TList(jnp.concatenate([lst.items, pad]), lst.length, lst.dtype, lst.shape, limit=lst.limit)


def sized_by_plan(node: Node, lst: TList, shape: Any, plan: tuple[int, int], per_step: int) -> TList:
    """A list that grows where nothing bounds it (a loop without a bound, a write at a run-time index
    outside loops), under ``jta.checked``: room for ``per_step`` elements in each of the steps the plan
    gives (:mod:`jta._core.capacities`); a write past them reports the steps it needs, and
    ``jta.checked`` grows them (for all of a loop's lists at once) and runs again."""
    steps, number = plan
    have = lst.length if lst.static else rows(lst.items)
    lst = materialize(lst, node, have + steps * per_step, shape).traced()
    return TList(lst.items, lst.length, lst.dtype, lst.shape, limit=lst.limit, plan=(number, have, per_step))


def _check_shape(node: Node, shape: Optional[tuple[Optional[int], ...]], item: Any) -> None:
    """TensorFlow's check of a write against the list's element shape."""
    if not admits(shape, np.shape(item)):
        misuse(node, "Tried to set a tensor with incompatible shape at a list index. Item element shape: "
                     f"{list(np.shape(item))} list shape: {shape_text(shape)}")


def _with_item(lst: TList, node: Node, index: Any, item: Any, resize: bool) -> TList:
    """``lst`` with element ``index`` set to ``item`` (growing a static list where allowed)."""
    item = jnp.asarray(item, lst.dtype)
    i = static_int(index)
    if i is not None and one_by_one(lst):
        check(node, i < 0 or (i >= lst.length and not resize), GraphError.LIST_MODIFY, i, lst.length, 0)
        _check_shape(node, lst.shape, item)
        length = max(lst.length, i + 1)
        parts = [*(lst.parts or (None,) * lst.length), *(None,) * (length - lst.length)]
        parts[i] = item
        return TList(None, length, lst.dtype, lst.shape, tuple(parts), limit=lst.limit)
    if lst.parts is not None:
        lst = unparts(lst, node)
    if lst.static and i is not None:
        check(node, i < 0 or (i >= lst.length and not resize), GraphError.LIST_MODIFY, i, lst.length, 0)
        length = max(lst.length, i + 1)
        _check_shape(node, lst.element_shape(), item)
        lst = materialize(TList(lst.items, lst.length, lst.dtype, lst.shape, limit=lst.limit), node, length, item.shape)
        return TList(lst.items.at[i].set(item), length, lst.dtype, lst.shape, limit=lst.limit)
    if lst.items is None or (lst.static and not resize and lst.items.shape[0] < lst.length):
        lst = materialize(lst, node, lst.length if lst.static else 0, item.shape)
    if lst.static and resize:  # a write at a run-time index grows the list outside a loop that sized it
        plans = capacities.planned_rows()
        if plans is None:
            GraphError.LIST_CAPACITY.raise_(node=node.name, op=node.op, what=(
                "a write at an index only known at run time may grow the list outside a loop that sized it."))
        lst = sized_by_plan(node, lst, item.shape, plans, 1)  # (under jta.checked: rows from its plan)
    at = index_of(index)
    if resize:  # grows the list, within the buffer its loop sized
        check(node, at < 0, GraphError.LIST_MODIFY, at, lst.length, 0)
        length = jnp.maximum(lst.length, at + 1)
    else:
        check(node, (at < 0) | (at >= lst.length), GraphError.LIST_MODIFY, at, lst.length, 0)
        length = lst.length
    check(node, at >= rows(lst.items), GraphError.LIST_BEYOND_CAPACITY, at, rows(lst.items), 0, plan=lst.plan)
    return TList(_set_rows(lst.items, index, item), length, lst.dtype, lst.shape, limit=lst.limit, plan=lst.plan)


# -- construction -----------------------------------------------------------------------------
@_reg("EmptyTensorList")
def _empty(node: Node, args: list[Any]) -> list[Any]:
    limit = static_int(args[1]) if len(args) > 1 else None
    return [TList(None, 0, element_dtype(node), _decl_shape(node, args[0]), limit=limit if limit is not None and limit >= 0
                  else None)]


@_reg("TensorListReserve")
def _reserve(node: Node, args: list[Any]) -> list[Any]:
    # A traced element shape is one a gradient loop popped from the accumulator of a static shape (its
    # value is the shape of what is set later): an unknown shape here, learned from the first write.
    shape = _decl_shape(node, args[0]) if known_now(args[0]) is not None else None
    n = static_int(args[1])
    planned = capacities.planned_rows() if n is None else None
    if planned is not None:  # under jta.checked: the rows its plan gives; more make it grow them and run again
        rows_, number = planned
        return reserve_bounded(node, args, rows_, plan=(number, 0, 1))
    if n is None:
        GraphError.NOT_STATIC.raise_(node=node.name, op=node.op, what=(
            "the number of elements (a size only known at run time has a static bound where it is "
            "tf.minimum(n, c); or call the function through jta.checked, which learns it at run time)"))
    check(node, n < 0, GraphError.LIST_RESERVE_NEGATIVE, n)
    if element_dtype(node) == VARIANT:  # a list of lists (pfor's): its elements are set one by one
        return [TList(None, n, VARIANT, shape, (None,) * n)]
    items = jnp.zeros((n, *(shape or ())), element_dtype(node)) if is_full(shape) else None
    return [TList(items, n, element_dtype(node), shape)]


def reserve_bounded(node: Node, args: list[Any], bound: int, plan: Optional[tuple[int, int, int]] = None
                    ) -> list[Any]:
    """``TensorListReserve`` of a run-time number of elements at most ``bound`` (``tf.minimum(n, c)``):
    a buffer of ``bound`` rows and a traced length, as a list a bounded loop wrote has. ``plan``: the
    bound is the rows ``jta.checked``'s plan gives (:class:`TList`'s ``plan``), and more elements are
    checked against it, which makes ``jta.checked`` grow it."""
    shape = _decl_shape(node, args[0]) if is_static(args[0]) else None
    length = jnp.asarray(args[1], jnp.int32)
    check(node, length < 0, GraphError.LIST_RESERVE_NEGATIVE, length)
    if plan is not None:
        check(node, length > bound, GraphError.LIST_BEYOND_CAPACITY, length - 1, bound, 0, plan=plan)
    # without a full element shape the buffer waits for the first write (a loop sizes it for its steps)
    items = jnp.zeros((bound, *(shape or ())), element_dtype(node)) if is_full(shape) and \
        element_dtype(node) != VARIANT else None
    return [TList(items, jnp.maximum(length, 0), element_dtype(node), shape, rows_hint=bound, plan=plan)]


@_reg("TensorListFromTensor")
def _from_tensor(node: Node, args: list[Any]) -> list[Any]:
    x, shape = jnp.asarray(args[0]), _decl_shape(node, args[1])
    if not admits(shape, x.shape[1:]):
        misuse(node, f"Specified a list with shape {shape_text(shape)} from a tensor with shape {shape_text(x.shape[1:])}")
    # ``shape``: the declared element shape (TensorFlow's list keeps it; TensorListConcatLists compares it)
    return [TList(x, int(x.shape[0]), x.dtype, shape)]


@_reg("TensorListSplit")
def _split(node: Node, args: list[Any]) -> list[Any]:
    x, shape, lengths = jnp.asarray(args[0]), args[1], learned_value(node, args[2], "the lengths")
    offsets = split_offsets(node, lengths, x.shape[0])
    parts = tuple(x[offsets[k]:offsets[k + 1]] for k in range(len(lengths)))
    return [TList(None, len(parts), x.dtype, _decl_shape(node, shape), parts)]


# -- element access ---------------------------------------------------------------------------
# A buffer of no rows (a list of run-time length 0: the stack of a loop that ran no steps, or of a first
# jta.checked trace, which guesses 0) has no row to index, which JAX refuses while tracing; the checks of
# the index fail there, so what is read is zeros and a write changes nothing.
def _rows_at(items: jax.Array, index: Any) -> jax.Array:
    """``items[index]`` (one index or a vector of them)."""
    index = jnp.asarray(index)
    if items.shape[0] == 0:
        return jnp.zeros((*index.shape, *items.shape[1:]), items.dtype)
    return items[index]


def _set_rows(items: jax.Array, index: Any, values: Any) -> jax.Array:
    """``items`` with ``items[index]`` set to ``values``."""
    return items if items.shape[0] == 0 else items.at[jnp.asarray(index)].set(values)


@_reg("TensorListSetItem")
def _set_item(node: Node, args: list[Any]) -> list[Any]:
    lst, index, item = args
    if lst.dtype == VARIANT:
        return [set_list(node, lst, index, item)]
    return [_with_item(lst, node, index, item, bool(node.attr("resize_if_index_out_of_bounds", False)))]


@_reg("TensorListGetItem")
def _get_item(node: Node, args: list[Any]) -> list[Any]:
    lst, index, shape = args
    at = index_of(index)
    check(node, (at < 0) | (at >= lst.length), GraphError.LIST_ACCESS, at, lst.length, 0)
    parts = elements(lst)
    if parts is not None and isinstance(at, np.integer):
        part = parts[at]
        return [hole(node, TList(None, lst.length, lst.dtype, lst.shape, parts), _decl_shape(node, shape))
                if part is None else part]
    lst = materialize(lst, node, lst.length if lst.static else 0, _decl_shape(node, shape))
    return [_rows_at(lst.items, index)]


def check_push(node: Node, lst: TList, item: Any, at: str = "") -> None:
    """TensorFlow's checks of a push: the dtype, the element shape, ``max_num_elements``."""
    dtype = jnp.asarray(item).dtype if not isinstance(item, (np.ndarray, np.generic)) else item.dtype
    if lst.dtype != VARIANT and jax.dtypes.canonicalize_dtype(dtype) != lst.dtype:
        misuse(node, f"Invalid data type{' at index ' + at if at else 's'}; op elements "
                      f"{tf_dtype_name(dtype)} but list elements {tf_dtype_name(lst.dtype)}")
    shape = lst.element_shape() if lst.parts is None else lst.shape
    if lst.dtype != VARIANT and not admits(shape, np.shape(item)):
        if lst.parts is None and lst.items is not None and admits(lst.shape, np.shape(item)):
            # (TensorFlow takes it: jta's buffer holds one shape)
            GraphError.BUFFER_SHAPE.raise_(node=node.name, op=node.op, shape=list(np.shape(item)),
                                           buffer=shape_text(shape))
        misuse(node, f"Tried to append a tensor with incompatible shape to a list{' at index ' + at if at else ''}. "
                      f"Op element shape: {list(np.shape(item))} list shape: {shape_text(shape)}")
    if lst.limit is not None:
        check(node, lst.length >= lst.limit if lst.static else lst.length >= np.int32(lst.limit),
               GraphError.LIST_FULL, lst.length, lst.limit)


def tf_dtype_name(dtype: Any) -> str:
    """A dtype's name in TensorFlow's kernel messages (``float``, ``double``, ``int32``)."""
    name: str = np.dtype(dtype).name
    names = {"float32": "float", "float64": "double", "float16": "half"}
    return names[name] if name in names else name


@_reg("TensorListPushBack")
def push_back(node: Node, args: list[Any]) -> list[Any]:
    lst, item = args
    if lst.dtype != VARIANT:
        check_push(node, lst, item)
    if lst.dtype == VARIANT:
        out = push_list(node, lst, item)
        out.const = pushed_consts(lst, item)
        return [out]
    empty = lst.static and lst.length == 0
    if lst.static and lst.items is None and (empty or lst.parts is not None):
        # pushed where the length is static (outside loops, in an unrolled one): the elements are kept one
        # by one, so a static value pops static (a trip count, a shape for the gradient loop) and the
        # elements may differ in shape (a loop variable with a shape invariant)
        parts = (*(lst.parts or ()), np.asarray(item, lst.dtype) if is_static(item) else jnp.asarray(item, lst.dtype))
        const = value_key(item) if is_static(item) and (empty or lst.const == value_key(item)) else None
        return [TList(None, lst.length + 1, lst.dtype, lst.shape, parts, const, limit=lst.limit)]
    out = _with_item(lst, node, lst.length, item, True)
    if is_static(item) and (empty or lst.const == value_key(item)):
        out.const = value_key(item)
    return [out]


@dataclasses.dataclass(frozen=True)
class AtMost:
    """A list's ``const`` where every element is a run-time count at most ``bound``."""

    bound: int


def length_bound(lst: TList) -> Optional[int]:
    """A static bound on a run-time length: the rows of the list's buffer (or of the one it waits for)."""
    if lst.static or lst.dtype == VARIANT or lst.parts is not None:
        return None
    if lst.rows_hint is not None:
        return lst.rows_hint
    return rows(lst.items) if lst.items is not None else None


def push_bounded(node: Node, args: list[Any], bound: int) -> list[Any]:
    """``TensorListPushBack`` of a run-time count at most ``bound``: the list keeps the bound (its
    ``const`` is :class:`AtMost` it) while every element pushed has one, so that a pop gives it back."""
    lst = args[0]
    empty = lst.static and lst.length == 0
    out = push_back(node, args)
    if lst.dtype != VARIANT and (empty or isinstance(lst.const, AtMost)):
        out[0].const = AtMost(bound if empty else max(bound, lst.const.bound))
    return out


@_reg("TensorListPopBack")
def _pop_back(node: Node, args: list[Any]) -> list[Any]:
    lst, shape = args
    check(node, lst.length <= 0, GraphError.LIST_POP_EMPTY, lst.length)
    parts = elements(lst) if lst.dtype != VARIANT else None
    if parts is not None:
        last = parts[-1]
        if last is None:  # unset: TensorFlow's pop does not look at the other elements for its shape
            full = merge_shape(_decl_shape(node, shape), lst.shape)
            if not is_full(full):
                misuse(node, f"Trying to read an uninitialized tensor but element_shape is not fully defined."
                             f"{shape_text(full)}")
            last = jnp.zeros(full, lst.dtype)
        return [TList(None, lst.length - 1, lst.dtype, lst.shape, parts[:-1], lst.const, limit=lst.limit), last]
    if lst.dtype == VARIANT:
        last = lst.length - 1
        if lst.parts is not None:
            return [TList(None, last, lst.dtype, lst.shape, lst.parts[:-1], lst.const, limit=lst.limit), lst.parts[-1]]
        return [TList(lst.items, last, lst.dtype, lst.shape, None, lst.const, limit=lst.limit),
                with_consts(lst, jax.tree_util.tree_map(lambda b: b[last], lst.items))]
    lst = materialize(lst, node, lst.length if lst.static else 0, _decl_shape(node, shape))
    last = lst.length - 1
    if lst.const is not None and not isinstance(lst.const, AtMost):
        return [TList(lst.items, last, lst.dtype, lst.shape, None, lst.const, limit=lst.limit), from_key(lst.const)]
    const = lst.const if isinstance(lst.const, AtMost) else None  # the bound stays for the pops after this one
    return [TList(lst.items, last, lst.dtype, lst.shape, None, const, limit=lst.limit), _rows_at(lst.items, last)]


@_reg("TensorListLength")
def _length(node: Node, args: list[Any]) -> list[Any]:
    n = args[0].length
    return [np.asarray(n, np.int32) if isinstance(n, int) else jnp.asarray(n, jnp.int32)]


@_reg("TensorListElementShape")
def _element_shape(node: Node, args: list[Any]) -> list[Any]:
    lst = args[0]
    shape = lst.element_shape()
    dtype = node.attr("shape_type", np.dtype("int32"))
    if shape is None:
        return [np.asarray(-1, dtype)]
    return [np.asarray([-1 if d is None else d for d in shape], dtype)]


@_reg("TensorListResize")
def _resize(node: Node, args: list[Any]) -> list[Any]:
    lst, size = args
    n = static_int(size)
    check(node, (n if n is not None else jnp.asarray(size)) < 0, GraphError.LIST_RESIZE_NEGATIVE,
           n if n is not None else size)
    if lst.parts is not None and n is not None and lst.static:  # one by one: the new elements unset
        parts = (*lst.parts[:n], *(None,) * (n - lst.length))
        return [TList(None, n, lst.dtype, lst.shape, parts, limit=lst.limit)]
    if lst.parts is not None:
        lst = unparts(lst, node)
    if n is not None and lst.static:
        if lst.items is None:
            return [TList(None, n, lst.dtype, lst.shape, limit=lst.limit)]
        items = lst.items[:n] if n <= lst.items.shape[0] else materialize(lst, node, n).items
        if n > lst.length:  # the new elements are unset
            items = items.at[lst.length:].set(0)
        return [TList(items, n, lst.dtype, lst.shape, limit=lst.limit)]
    lst = materialize(lst, node, lst.length if lst.static else 0)
    size = jnp.asarray(size, jnp.int32)
    rows = jnp.arange(lst.items.shape[0]).reshape((-1,) + (1,) * (lst.items.ndim - 1))
    keep = (rows < size) & (rows < lst.length)
    return [TList(jnp.where(keep, lst.items, 0), size, lst.dtype, lst.shape, limit=lst.limit)]


# -- whole-list reads and writes --------------------------------------------------------------
@_reg("TensorListStack")
def _stack(node: Node, args: list[Any]) -> list[Any]:
    return _stacked(node, args, None)


def _stacked(node: Node, args: list[Any], rows_: Optional[int]) -> list[Any]:
    """``TensorListStack`` (``rows_``: for a run-time length, the rows to return, else the whole
    padded buffer)."""
    lst, shape = args
    expected = int(node.attr("num_elements", -1))  # (a TensorArray's size; -1: any)
    if expected != -1:
        check(node, lst.length != expected, GraphError.LIST_STACK_COUNT, expected, lst.length)
    merged_shape(node, _decl_shape(node, shape), lst.shape)
    parts = elements(lst)
    if parts is not None:
        lst = TList(None, lst.length, lst.dtype, lst.shape, parts, limit=lst.limit)
        if hole_shape(node, lst, _decl_shape(node, shape)) is None and lst.length > 0:  # (TF's merge fails first)
            misuse(node, "Tried to stack list which only contains uninitialized tensors and has a "
                         f"non-fully-defined element_shape: {shape_text(merge_shape(_decl_shape(node, shape), lst.shape))}")
        lst = unparts(lst, node, _decl_shape(node, shape))
    if not lst.static:  # run-time length: the padded buffer (rows past the length are zeros)
        return [_first_rows(materialize(lst, node, 0, _decl_shape(node, shape)).items, rows_)]
    lst = materialize(lst, node, lst.length, _decl_shape(node, shape))
    return [lst.items[:lst.length]]


def _first_rows(items: jax.Array, rows_: Optional[int]) -> jax.Array:
    """The first ``rows_`` rows of a buffer (zeros past its end), or all of it (``None``)."""
    if rows_ is None:
        return items
    if rows_ <= items.shape[0]:
        return items[:rows_]
    return jnp.concatenate([items, jnp.zeros((rows_ - items.shape[0], *items.shape[1:]), items.dtype)])


def exact_rows(node: Node, args: list[Any], rows_: int) -> list[Any]:
    """``TensorListStack`` or ``TensorListConcat`` of a list of a run-time length, for a length of
    ``rows_`` elements (what ``jta.checked`` learned it is: :func:`jta._core.capacities.learned_rows`)."""
    if node.op == "TensorListStack":
        return _stacked(node, args, rows_)
    return _concatenated(node, args, rows_)


@_reg("TensorListGather")
def _gather(node: Node, args: list[Any]) -> list[Any]:
    lst, indices, shape = args
    merged_shape(node, _decl_shape(node, shape), lst.shape)
    if lst.parts is not None:
        lst = unparts(lst, node)
    bad, first = _first_out_of_range(indices, lst.length)
    check(node, bad, GraphError.LIST_GATHER, first, lst.length, 0)
    lst = materialize(lst, node, lst.length if lst.static else 0, _decl_shape(node, shape))
    return [_rows_at(lst.items, indices)]


def _scatter(node: Node, lst: TList, tensor: Any, indices: Any, length: int) -> TList:
    """``lst`` of ``length`` elements with ``tensor``'s rows at ``indices``, after TensorFlow's checks of
    each index in order (non-negative, then below the length)."""
    tensor = jnp.asarray(tensor, lst.dtype)
    if lst.parts is not None:
        lst = unparts(lst, node)
    flat = indices.reshape(-1)
    if flat.size:
        bad = (flat < 0) | (flat >= length)
        first = flat[bad.argmax()]
        check(node, bad.any() & (first < 0), GraphError.LIST_SCATTER_NEGATIVE)
        check(node, bad.any() & (first >= 0), GraphError.LIST_SCATTER_RANGE, first, length)
    lst = materialize(lst, node, length, tuple(tensor.shape[1:]))
    return TList(_set_rows(lst.items, indices, tensor), length, lst.dtype, lst.shape, limit=lst.limit)


def _indices_and_top(node: Node, indices: Any) -> tuple[Any, int]:
    """The indices (NumPy when known now) and the length they reach, ``max + 1`` (0 for none): known
    now, or learned by ``jta.checked`` (else refused)."""
    indices = _known_or_index(indices)
    if isinstance(indices, np.ndarray):
        return indices, int(np.max(indices)) + 1 if indices.size else 0
    return indices, int(learned_value(node, jnp.max(indices, initial=-1) + 1, "the largest index (the list's length)"))


@_reg("TensorListScatterIntoExistingList")
def _scatter_existing(node: Node, args: list[Any]) -> list[Any]:
    """The list grows to the largest index plus one, as TensorFlow's kernel grows it."""
    lst, tensor, indices = args
    if not lst.static:  # (a run-time length: within its buffer)
        lst = materialize(lst, node, 0, tuple(np.shape(tensor)[1:]))
        return [TList(_set_rows(lst.items, indices, tensor), lst.length, lst.dtype, lst.shape, limit=lst.limit)]
    if known_now(indices) is None and not capacities.active():
        # under a bare jit the list keeps its length: an index past it is refused from compiled code
        indices = jnp.asarray(indices, jnp.int32).reshape(-1)
        past = indices >= lst.length
        check(node, past.any(), GraphError.LIST_SCATTER_GROWS, indices[past.argmax()], lst.length)
        return [_scatter(node, lst, tensor, indices, lst.length)]
    indices, top = _indices_and_top(node, indices)
    return [_scatter(node, lst, tensor, indices, max(lst.length, top))]


@_reg("TensorListScatter", "TensorListScatterV2")
def _scatter_new(node: Node, args: list[Any]) -> list[Any]:
    """A new list of ``num_elements`` (``TensorListScatterV2``; -1, and ``TensorListScatter``: the
    largest index plus one) with ``tensor``'s rows at ``indices``."""
    tensor, indices, shape = args[:3]
    n = int(learned_value(node, args[3], "num_elements")) if len(args) > 3 else -1
    if n < -1:
        GraphError.INVALID_ARGUMENT.raise_(node=node.name, op=node.op,
                                           error=f"TensorListScatter expects num_elements >= -1, found: {n}")
    indices, top = _indices_and_top(node, indices) if n == -1 else (_known_or_index(indices), n)
    lst = TList(None, top, element_dtype(node), _decl_shape(node, shape))
    return [_scatter(node, lst, tensor, indices, top)]


def _known_or_index(indices: Any) -> Any:
    known = known_now(indices)
    return known if known is not None else jnp.asarray(indices, jnp.int32)


@_reg("TensorListConcat", "TensorListConcatV2")
def _concat(node: Node, args: list[Any]) -> list[Any]:
    return _concatenated(node, args, None)


def _concatenated(node: Node, args: list[Any], rows_: Optional[int]) -> list[Any]:
    """``TensorListConcat`` (``rows_``: for a run-time length, the elements to concatenate, else the
    whole padded buffer)."""
    lst = args[0]
    shape = _decl_shape(node, args[1]) if len(args) > 1 else node.attr("element_shape")
    parts = elements(lst)
    if parts is not None and lst.length > 0:
        lst = TList(None, lst.length, lst.dtype, lst.shape, parts, limit=lst.limit)
        pieces = concat_pieces(node, lst, shape, args[2] if len(args) > 2 else None)
        return [jnp.concatenate(pieces), np.asarray([p.shape[0] for p in pieces], np.int64)]
    if lst.static:
        lst = materialize(lst, node, lst.length, shape)
        items = lst.items[:lst.length]
    else:  # a run-time length: the whole buffer (pad_stacks=True), the rows past the length zeros
        items = _first_rows(materialize(lst, node, 0, shape).items, rows_)
    if items.ndim < 2:
        misuse(node, "Concat requires elements to be at least vectors, found scalars instead.")
    lengths = np.full(items.shape[0], items.shape[1], np.int64)
    return [items.reshape((-1, *items.shape[2:])), lengths]


# -- list values in ordinary ops (the tape's gradient sums and zeros) --------------------------
def zeros_like(lst: TList) -> TList:
    if lst.parts is not None:
        return TList(None, lst.length, lst.dtype, lst.shape, jax.tree_util.tree_map(jnp.zeros_like, lst.parts))
    items = None if lst.items is None else jax.tree_util.tree_map(jnp.zeros_like, lst.items)
    return TList(items, lst.length, lst.dtype, lst.shape, limit=lst.limit)


def add_n(node: Node, lists: list[TList]) -> TList:
    """The sum of lists element by element (an unset element counts as zeros)."""
    known = [lst for lst in lists if lst.items is not None or lst.parts is not None]
    if not known:
        return lists[0]
    if any(lst.parts is not None and lst.dtype != VARIANT for lst in known) and all(
            lst.static and lst.length == known[0].length for lst in known):
        return add_parts(node, known)
    out = known[0]
    if out.dtype == VARIANT:  # lists of lists of one structure: the sum leaf by leaf
        items = jax.tree_util.tree_map(lambda *xs: sum(xs[1:], xs[0]), *[lst.items for lst in known])
        return TList(items, out.length, out.dtype, out.shape)
    buffers = [b for b in (lst if lst.parts is None else unparts(lst, node) for lst in known) if b.items is not None]
    if not buffers:  # elements one by one, none set
        return out
    items = buffers[0].items
    for other in buffers[1:]:
        rows = max(items.shape[0], other.items.shape[0])
        if items.shape[1:] != other.items.shape[1:]:  # never broadcast one element into another
            incompatible(node, items.shape[1:], other.items.shape[1:])
        items = materialize(TList(items, 0, out.dtype, None), node, rows).items + \
            materialize(other, node, rows).items
    return TList(items, out.length, out.dtype, out.shape)


# -- lists of lists (a tape's accumulators of an inner loop's lists) -----------------------------
# With a static length they hold their elements one by one (``parts``: an unrolled loop's inner lists
# may differ in length); as a loop's carry, a buffer: a list whose leaves have one more leading axis,
# row k of every leaf element k (the elements must then have one structure).
