"""Where a stack padded by ``pad_stacks=True`` may go.

Under ``jit`` a list written in a loop whose trip count the data decides has a run-time length, and
with ``pad_stacks=True`` its ``stack()`` has the buffer's rows, those past the length zeros. Those
rows are invisible only to what keeps zero rows zero and then sums them, or returns them: a
``reduce_mean``, a ``softmax``, a ``max`` or ``S[-1]`` of the padded stack sees them, and would
give a value TensorFlow never gives, of TensorFlow's shape. So the evaluator follows each padded
value from its stack, op by op, and refuses (code 488) the first op that could see its padding:

- the function's outputs (the padding visible in their shape: documented), and sums over the
  padded axis (where zero rows add nothing), take it, as does ``Rank``; a transpose moves it;
- elementwise ops that map zeros to zeros (``Neg``, ``Square``, ``Cast``, ``Relu``...), with
  operands padded alike, of one stack (``x + c`` is not zero where ``x`` is; two stacks' lengths may
  differ), or a finite constant factor that broadcasts along the padded axis, pass it on;
- the tape's gradient ops (under the ``gradients`` and ``gradient_tape`` scopes TensorFlow builds
  them in) take it: the cotangents they compute for the padded rows (not zeros: the gradient of a
  sum is one there) reach only those rows, which the list's gradient never reads (it reads by
  index, under the length); so what they compute from a padded value is followed too, and only
  gradient ops may read it (not the function's outputs: ``tape.gradient(loss, stack)`` is refused),
  and they may read a padded value only as TensorFlow's gradient functions of the ops above do
  (shapes, elementwise: a ``Mean`` under a ``gradients`` name scope is refused); the list a stack's
  gradient makes again has the forward list's run-time length (a ``PushBack``'s gradient pops its last
  element, which the padded rows would have been);
- a call of a function (a nested ``tf.function``, a cond's branches, which close over it under
  ``lax.switch`` too) takes it as it is: the function's own ops are followed;
- a loop's carry or a run-time branch's output does not: ``lax`` makes a new value there, which could
  not be followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from ._list_value import TList, unparts
from ._messages import GraphError
from ._nodes import Node
from ._ops import is_static

__all__ = ["PaddedStacks", "STACK_OPS"]

STACK_OPS = ("TensorListStack", "TensorListConcat", "TensorListConcatV2")

# f(0) == 0, finite derivative at 0 not needed (the padded rows' cotangents are never read)
_ZERO_KEEPING = frozenset({
    "Identity", "Snapshot", "StopGradient", "PreventGradient", "Neg", "Square", "Abs", "Sign",
    "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Softsign", "Cast", "Sin", "Sinh", "Asinh", "Tan", "Atan",
    "Tanh", "Atanh", "Erf", "Expm1", "Log1p"})
_ZERO_SUMS = frozenset({"Add", "AddV2", "Sub", "AddN"})  # zero where every operand is (all padded alike)
_PASSING = frozenset({"Identity", "IdentityN", "AddN"})  # what passes cotangents on, outside the scopes too
# what TensorFlow's gradient functions of the ops above do with their forward values: shapes, elementwise
_GRADIENT_READS = _ZERO_KEEPING | _ZERO_SUMS | _PASSING | frozenset({
    "Mul", "Shape", "ShapeN", "Rank", "Reshape", "BroadcastTo", "ExpandDims", "ZerosLike", "OnesLike",
    "TanhGrad", "ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "LeakyReluGrad", "SoftsignGrad",
    "Cos", "Cosh", "Reciprocal", "Square", "Sign", "Select", "SelectV2", "GreaterEqual", "Greater", "Less",
    "LessEqual", "Equal", "NotEqual", "TensorListFromTensor", "PartitionedCall", "StatefulPartitionedCall"})
_RELISTING = ("TensorListFromTensor", "TensorListSplit")  # the gradients of a stack and of a concat
_GRADIENT_SCOPE = re.compile(r"(?:^|/)(?:gradients|gradient_tape)(?:_\d+)?/")


class PaddedStacks:
    """The padded values of one call, by ``id`` (each kept alive with its padded axis and its stack), and
    the values gradient ops computed from them (``gradients``: their padded rows hold anything)."""

    def __init__(self) -> None:
        self.values: dict[int, tuple[Any, int, str]] = {}
        self.gradients: dict[int, tuple[Any, tuple[int, int, int], str]] = {}  # (its source's rank, axis, rows)
        self.crossing: list[bool] = []  # the bodies running, innermost last: whether lax remakes their outputs
        self.lengths: dict[str, Any] = {}  # each padded stack's list's run-time length, by the stack's name

    def follow(self, node: Node, args: list[Any], run: Callable[[Node, list[Any]], Optional[list[Any]]],
               inlined: bool = False) -> Optional[list[Any]]:
        """``run(node, args)``, refusing it where a padded argument could see its padding; ``inlined``: the
        node runs functions on the values given (a call, a cond), whose own nodes are followed."""
        if inlined:
            return run(node, args)
        padded = [(k, self.values[id(a)]) for k, a in enumerate(args) if id(a) in self.values]
        # what gradient ops computed from padded values (even their shapes): each with its source's rows
        derived = [self.gradients[id(a)] for a in args if id(a) in self.gradients]
        cotangents = [self.gradients[id(a)] for a in args  # (of the source's rows)
                      if id(a) in self.gradients and _aligned(a, self.gradients[id(a)][1])]
        if _gradient_op(node) or (node.op in _PASSING and derived and len(cotangents) == len(args)):
            if padded and node.op not in _GRADIENT_READS:  # (a gradient function reads a padded value so only)
                GraphError.PADDED_USE.raise_(node=node.name, op=node.op, stack=padded[0][1][2])
            outs = run(node, args)
            length = self.lengths.get(cotangents[0][2]) if cotangents and cotangents[0][1][1] == 0 else None
            if node.op in _RELISTING and outs and length is not None:
                # the stack's gradient made a list again: TensorFlow's has the forward list's length (a
                # PushBack's gradient pops its last element: the padded rows are past it, never popped)
                lst = outs[0] if outs[0].parts is None else unparts(outs[0], node)  # (a split's pieces: alike)
                outs = [TList(lst.items, length, lst.dtype, lst.shape, limit=lst.limit), *outs[1:]]
            sources = [((np.ndim(v), axis, np.shape(v)[axis]), stack) for _, (v, axis, stack) in padded]
            for rows, stack in sources + [(d[1], d[2]) for d in derived]:
                self.gradients.update({id(o): (o, rows, stack) for o in outs or () if not isinstance(o, TList)})
            return outs
        if cotangents:  # (the padded rows' cotangents, which are not zeros: only gradient ops may read them)
            GraphError.PADDED_USE.raise_(node=node.name, op=node.op, stack=f"{cotangents[0][2]} (a gradient of it)")
        if not padded:
            outs = run(node, args)
            if node.op in STACK_OPS and outs is not None and args and not getattr(args[0], "static", True):
                self._add(outs[0], 0, node.name)
                self.lengths[node.name] = args[0].length
            return outs
        if node.op == "Rank":  # (a rank sees no row: a reduction over all axes of a shape not known asks it)
            return run(node, args)
        _, (value, axis, stack) = padded[0]
        # (operands padded alike: of one stack, one length; two stacks' lengths may differ, or one may
        # broadcast, where their padded rows would line up; a constant factor must not span the padded axis)
        alike = len({(p[2], p[1], np.ndim(p[0])) for _, p in padded}) == 1
        keeps = node.op in _ZERO_KEEPING or (node.op in _ZERO_SUMS and alike and len(padded) == len(args)) or (
            node.op == "Mul" and alike and all(k in dict(padded) or _finite_constant(a, np.ndim(value) - axis)
                                               for k, a in enumerate(args)))
        if node.op == "Transpose" and is_static(args[1]):  # (the padding moves with its axis)
            outs = run(node, args)
            if outs is not None:
                self._add(outs[0], [int(p) % np.ndim(value) for p in np.ravel(args[1])].index(axis), stack)
            return outs
        if node.op == "Sum" and is_static(args[1]):
            axes = {int(a) % np.ndim(args[0]) for a in np.ravel(args[1])}
            outs = run(node, args)
            if axis not in axes and outs is not None:  # (the padding kept, on the axis the sum leaves it)
                self._add(outs[0], axis if node.attr("keep_dims") else axis - sum(a < axis for a in axes), stack)
            return outs
        if not keeps:
            GraphError.PADDED_USE.raise_(node=node.name, op=node.op, stack=stack)
        outs = run(node, args)
        for out in outs or ():
            if np.ndim(out) == np.ndim(value):
                self._add(out, axis, stack)
        return outs

    def leaving(self, outputs: list[Any], where: str) -> None:
        """A body's ``outputs``: a loop or a run-time branch turns them into new values (no padded value
        may leave there), or they are the function's (no gradient of a padded value may leave there)."""
        crossing = bool(self.crossing and self.crossing[-1])
        if not crossing and self.crossing:
            return
        for out in outputs:
            if id(out) in self.gradients and _aligned(out, self.gradients[id(out)][1]):
                GraphError.PADDED_USE.raise_(node=where, op="an output", stack=f"{self.gradients[id(out)][2]} "
                                                                             "(a gradient of it)")
            if crossing and id(out) in self.values:
                GraphError.PADDED_USE.raise_(node=where, op="a loop's or a branch's output",
                                             stack=self.values[id(out)][2])

    def _add(self, value: Any, axis: int, stack: str) -> None:
        self.values[id(value)] = (value, axis, stack)


def _aligned(value: Any, rows: tuple[int, int, int]) -> bool:
    """Whether ``value`` has the rows of the padded value ``rows`` (rank, axis, rows) describes."""
    rank, axis, count = rows
    return np.ndim(value) == rank and np.shape(value)[axis] == count


def _gradient_op(node: Node) -> bool:
    """An op of a tape's gradient graph: under TensorFlow's ``gradients``/``gradient_tape`` scope (also
    inside a loop's: ``while/gradient_tape/...``), or a call of a nested function's ``__backward_`` one."""
    return _GRADIENT_SCOPE.search(node.name) is not None or _backward(node)


def _backward(node: Node) -> bool:
    """A call of a tape's gradient function (a nested ``tf.function``'s ``__backward_f_12``)."""
    f = node.attr("f") if node.op in ("PartitionedCall", "StatefulPartitionedCall") else None
    name = getattr(f, "name", f)
    return isinstance(name, (str, bytes)) and "__backward_" in (name.decode() if isinstance(name, bytes) else name)


def _finite_constant(value: Any, below: int) -> bool:
    """A finite constant of fewer than ``below`` axes (it broadcasts along the padded axis)."""
    return is_static(value) and np.ndim(value) < below and bool(np.all(np.isfinite(np.asarray(value))))
