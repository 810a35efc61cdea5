"""The stateful ops of an imported graph: TensorArrays (through :mod:`jta.raw_ops`) and v1 stacks.

Everything a graph's resource ops change lives in one pytree, :class:`Resources`: the raw-ops
:class:`~jta.raw_ops.State` (arrays by handle, gradient accumulators) and the stacks by name. The
importer threads it through converted loops and conds. Handles are static strings: a
``TensorArrayV3`` node's array is named after the node (the same name in every iteration of a
loop that creates it), a stack is named after its ``StackV2`` node.

Stacks (``StackV2``/``StackPushV2``/``StackPopV2``: TensorFlow's v1 gradients keep the forward
loop's activations in them) are a tuple of values in straight-line or unrolled code, a
``[capacity, ...]`` buffer with a top index inside ``lax.scan``/``while_loop``, or a constant
when every push gives the same static value (a resource handle, an inner loop's static count).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .. import raw_ops
from .._core import capacities
from .._core.array import known_size
from .._delivery import value_ops
from ._list_value import from_key, value_key
from ._messages import GraphError
from ._nodes import Node
from ._ops import is_static, registrar
from ._ops_checks import known_now


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Stack:
    """A v1 stack: ``items`` (straight-line), or ``data[:top]`` (in loops), or a constant ``const``."""

    items: tuple[Any, ...] = ()
    data: Any = None
    top: Any = None
    const: Any = None  # a handle (str) or a hashable (dtype, shape, bytes) static value
    # ``max_size`` (None: any; a traced one -1 for any), checked by pushes in line; not a leaf, so a loop's
    # carry drops it
    limit: Any = dataclasses.field(default=None, compare=False)

    def tree_flatten(self) -> tuple[tuple[Any, ...], Any]:
        return (self.items, self.data, self.top), self.const

    @classmethod
    def tree_unflatten(cls, const: Any, children: Any) -> Stack:
        return cls(children[0], children[1], children[2], const)


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Resources:
    """Everything the graph's stateful ops change: the raw-ops state and the stacks."""

    arrays: raw_ops.State = dataclasses.field(default_factory=raw_ops.new_state)
    stacks: dict[str, Stack] = dataclasses.field(default_factory=dict)

    def tree_flatten(self) -> tuple[tuple[Any, ...], None]:
        return (self.arrays, self.stacks), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Any) -> Resources:
        return cls(children[0], children[1])


@dataclasses.dataclass
class Recorder:
    """What one discovery trace of a loop body saw: accumulators it created, stack pushes and pops."""

    grads: list[tuple[str, str, tuple[int, ...]]] = dataclasses.field(default_factory=list)
    pushes: dict[str, list[tuple[Any, Optional[int]]]] = dataclasses.field(default_factory=dict)
    popped: set[str] = dataclasses.field(default_factory=set)
    multiplier: Optional[int] = 1  # how often the traced code runs per body run (None: unknown)


@dataclasses.dataclass
class Context:
    """Per-import settings and the active discovery recorders."""

    array_ids: dict[str, int]  # TensorArrayV3 node -> the number in its handle
    capacity: Optional[int] = None  # tensor_array_capacity=
    recorders: list[Recorder] = dataclasses.field(default_factory=list)
    depth: int = 0  # loop bodies being traced (0: straight-line or unrolled code, where buffers may grow)


def const_key(v: Any) -> Any:
    """A hashable key of a static value (a handle string or a numpy array)."""
    return v if isinstance(v, str) else value_key(v)


def const_value(key: Any) -> Any:
    return key if isinstance(key, str) else from_key(key)


ResourceOp = Callable[[Context, Node, list[Any], Resources], tuple[Resources, list[Any]]]
RESOURCE_OPS: dict[str, ResourceOp] = {}


_reg = registrar(RESOURCE_OPS)


def _arrays(res: Resources, state: raw_ops.State) -> Resources:
    return Resources(state, res.stacks)


def _index(v: Any) -> Any:
    return int(v) if is_static(v) and np.ndim(v) == 0 else v


def known(v: Any) -> Any:
    """``v`` as a static numpy value when it is a concrete (not traced) integer or boolean scalar: a trip
    count or a size fed to an eager call is then known, as it is to TensorFlow (the loop is a ``lax.scan``
    whose stacks are sized by it rather than a ``lax.while_loop``; ``stack()`` of an array that size has a
    shape), and a fed cond predicate prunes the branch not taken, which TensorFlow never runs (under
    ``jit`` both branches run and are selected between)."""
    if isinstance(v, jax.Array) and not isinstance(v, Tracer) and v.ndim == 0 and (
            jnp.issubdtype(v.dtype, jnp.integer) or v.dtype == jnp.bool_):
        return np.asarray(v)
    return v


# -- TensorArrays -----------------------------------------------------------------------------
@_reg("TensorArrayV3")
def _ta_new(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    size = known(args[0])
    if isinstance(size, Tracer):  # the buffer's shape would depend on it
        GraphError.NOT_STATIC.raise_(node=node.name, op=node.op, what=(
            "the size (here a value known at run time only: call the imported function outside jax.jit, with "
            "concrete inputs, or feed it as a constant; a dynamic_size=True array of size 0 grows instead)"))
    state = res.arrays
    counter = state.counter
    # The handle is <name>_<node number>: the same in every iteration of a loop that creates it.
    state = dataclasses.replace(state, counter=ctx.array_ids[node.name])
    dynamic = bool(node.attr("dynamic_size", False))
    state, handle, flow = raw_ops.TensorArrayV3(
        state, _index(size), node.attr("dtype"), element_shape=node.attr("element_shape"), dynamic_size=dynamic,
        clear_after_read=bool(node.attr("clear_after_read", True)),
        identical_element_shapes=bool(node.attr("identical_element_shapes", False)),
        tensor_array_name=node.attr("tensor_array_name", "") or node.name,
        capacity=ctx.capacity if dynamic else None)
    state = dataclasses.replace(state, counter=counter)
    # A new array (a loop creating it again): its accumulators start from zero, keeping the carry's structure.
    return renew_accumulators(_arrays(res, state), handle), [handle, flow]


@_reg("TensorArrayWriteV3")
def _ta_write(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, i, v, flow = args
    state, flow = raw_ops.TensorArrayWriteV3(res.arrays, h, _index(i), v, flow)
    return _arrays(res, state), [flow]


@_reg("TensorArrayReadV3")
def _ta_read(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, i, flow = args
    state, v = raw_ops.TensorArrayReadV3(res.arrays, h, _index(i), flow, node.attr("dtype"))
    return _arrays(res, state), [v]


@_reg("TensorArrayGatherV3")
def _ta_gather(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, indices, flow = args
    state, v = raw_ops.TensorArrayGatherV3(res.arrays, h, indices, flow, node.attr("dtype"), node.attr("element_shape"))
    return _arrays(res, state), [v]


@_reg("TensorArrayScatterV3")
def _ta_scatter(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, indices, v, flow = args
    state, flow = raw_ops.TensorArrayScatterV3(res.arrays, h, indices, v, flow)
    return _arrays(res, state), [flow]


@_reg("TensorArrayConcatV3")
def _ta_concat(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, flow = args
    state, v, lengths = raw_ops.TensorArrayConcatV3(res.arrays, h, flow, node.attr("dtype"),
                                              node.attr("element_shape_except0"))
    return _arrays(res, state), [v, np.asarray(lengths, np.int64) if is_static(lengths) else lengths]


@_reg("TensorArraySplitV3")
def _ta_split(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, v, lengths, flow = args
    state, flow = raw_ops.TensorArraySplitV3(res.arrays, h, v, lengths, flow)
    return _arrays(res, state), [flow]


@_reg("TensorArraySizeV3")
def _ta_size(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, flow = args
    state, n = raw_ops.TensorArraySizeV3(res.arrays, h, flow)
    static = known_size(state[h])
    if static is None and not ctx.depth:  # a grown array's size, learned by jta.checked (its stack() reads range(size))
        static = capacities.stack_rows(state[h])
    return res, [np.asarray(static, np.int32) if static is not None else n]


@_reg("TensorArrayCloseV3")
def _ta_close(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    return _arrays(res, raw_ops.TensorArrayCloseV3(res.arrays, args[0])), []


@_reg("TensorArrayGradV3", "TensorArrayGradWithShape")
def _ta_grad(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, flow = args[:2]
    prepend = tuple(int(d) for d in np.reshape(args[2], -1)) if len(args) > 2 else ()
    source = node.attr("source", "")
    for rec in ctx.recorders:
        rec.grads.append((h, source, prepend))
    state, g, _ = raw_ops.TensorArrayGradWithShape(res.arrays, h, flow, prepend, source)
    return _arrays(res, state), [g, flow]  # TF's flow_out is the forward flow


def precreate_grad(ctx: Context, res: Resources, handle: str, source: str, prepend: tuple[int, ...]) -> Resources:
    """Create the accumulator a loop body will ask for, before the loop (recorded like the op itself)."""
    for rec in ctx.recorders:
        rec.grads.append((handle, source, prepend))
    state, _, _ = raw_ops.TensorArrayGradWithShape(res.arrays, handle, 0.0, prepend, source)
    return _arrays(res, state)


def grad_prepend(state: raw_ops.State, key: tuple[str, str]) -> tuple[int, ...]:
    """The ``shape_to_prepend`` an existing accumulator was created with."""
    forward, acc = state.arrays[key[0]].element_shape, state.grads[key].element_shape
    return tuple(int(d or 0) for d in acc[: len(acc) - len(forward)]) if acc is not None and forward is not None else ()


def renew_accumulators(res: Resources, handle: str) -> Resources:
    """Fresh (zero) accumulators for ``handle``: it names a new array now (a handle popped from a stack
    in a gradient loop stands for the array of one forward iteration)."""
    state = res.arrays
    for key in [k for k in state.grads if k[0] == handle]:
        prepend = grad_prepend(state, key)
        rest = raw_ops.State(state.arrays, {k: v for k, v in state.grads.items() if k != key}, state.counter)
        state, _, _ = raw_ops.TensorArrayGradWithShape(rest, handle, 0.0, prepend, key[1])
    return _arrays(res, state)


# -- stacks -----------------------------------------------------------------------------------
@_reg("StackV2", "Stack")
def _stack_new(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    limit = known_now(args[0]) if args else None
    if limit is not None:
        limit = int(limit) if limit >= 0 else None
    elif args:  # (a run-time max_size)
        limit = jnp.asarray(args[0])
    return Resources(res.arrays, {**res.stacks, node.name: Stack(limit=limit)}), [node.name]


def _check_room(node: Node, s: Stack, handle: str) -> None:
    """TensorFlow's check of a push against the stack's ``max_size`` (code 491)."""
    if s.limit is not None:
        size = len(s.items) if s.data is None else s.top
        value_ops.report(node.name, (s.limit >= 0) & (size >= s.limit), GraphError.STACK_OVERFLOW, s.limit,
                         extra={"op": node.op, "stack": handle})


@_reg("StackPushV2", "StackPush")
def _stack_push(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    h, v = args
    s = res.stacks[h]
    for rec in ctx.recorders:
        rec.pushes.setdefault(h, []).append((v, rec.multiplier))
    if isinstance(v, str) and s.const is None and not s.items and s.data is None:
        s = Stack(const=v)
    elif s.const is not None:
        if not (isinstance(v, str) or is_static(v)) or const_key(v) != s.const:
            GraphError.LOOP_STRUCTURE.raise_(frame=node.name, what="a stack of handles got a different value")
    elif s.data is not None:
        _check_room(node, s, h)
        data = s.data
        if not ctx.depth:  # in line: one more slot (a loop's buffer has room for that loop's pushes only)
            data = jnp.concatenate([data, jnp.zeros((1, *data.shape[1:]), data.dtype)])
        s = Stack((), jax.lax.dynamic_update_index_in_dim(data, jnp.asarray(v, data.dtype), s.top, 0), s.top + 1,
                  limit=s.limit)
    else:
        _check_room(node, s, h)
        s = Stack((*s.items, v), limit=s.limit)
    return Resources(res.arrays, {**res.stacks, h: s}), [v]


@_reg("StackPopV2", "StackPop")
def _stack_pop(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    (h,) = args
    s = res.stacks[h]
    for rec in ctx.recorders:
        rec.popped.add(h)
    if s.const is not None:
        return res, [const_value(s.const)]
    if s.data is not None:
        top = s.top - 1
        v = jax.lax.dynamic_index_in_dim(s.data, jnp.maximum(top, 0), 0, keepdims=False)
        return Resources(res.arrays, {**res.stacks, h: Stack((), s.data, top, limit=s.limit)}), [v]
    if not s.items:
        GraphError.LOOP_STRUCTURE.raise_(frame=node.name, what="pop from an empty stack")
    return Resources(res.arrays, {**res.stacks, h: Stack(s.items[:-1], limit=s.limit)}), [s.items[-1]]


@_reg("StackCloseV2", "StackClose")
def _stack_close(ctx: Context, node: Node, args: list[Any], res: Resources) -> tuple[Resources, list[Any]]:
    return res, []


def as_buffer(s: Stack, capacity: int, like: Any) -> Stack:
    """``s`` as a ``[capacity, ...]`` buffer whose elements look like ``like``, its items first."""
    data = jnp.zeros((capacity, *np.shape(like)), jax.dtypes.canonicalize_dtype(like.dtype))  # int64 lengths: int32
    for k, item in enumerate(s.items):
        data = data.at[k].set(item)
    return Stack((), data, jnp.asarray(len(s.items), jnp.int32), limit=s.limit)


def buffered(res: Resources, handle: Any) -> Resources:
    """``res`` with the stack ``handle`` as a buffer (a traced top) when it is a tuple of items."""
    s = res.stacks.get(handle) if isinstance(handle, str) else None
    if s is None or s.const is not None or s.data is not None or not s.items:
        return res
    return Resources(res.arrays, {**res.stacks, handle: as_buffer(s, len(s.items), s.items[0])})
