"""Where a stack padded by ``pad_stacks=True`` may go.

Under ``jit`` a list written in a loop whose trip count the data decides has a run-time length, and
with ``pad_stacks=True`` its ``stack()`` has the buffer's rows, those past the length zeros. Those
rows are invisible only to what keeps zero rows zero and then sums them, or returns them: a
``reduce_mean``, a ``softmax``, a ``max`` or ``S[-1]`` of the padded stack sees them, and would
give a value TensorFlow never gives, of TensorFlow's shape. So the evaluator follows each padded
value from its stack, op by op, and refuses (code 488) the first op that could see its padding:

- the function's outputs (the padding visible in their shape: documented), and sums over the
  padded axis (where zero rows add nothing), take it;
- elementwise ops that map zeros to zeros (``Neg``, ``Square``, ``Cast``, ``Relu``...), with
  operands padded alike, of one stack (``x + c`` is not zero where ``x`` is; two stacks' lengths may
  differ), or a finite constant factor that broadcasts along the padded axis, pass it on;
- the tape's gradient ops (under the ``gradients/`` and ``gradient_tape/`` scopes TensorFlow
  builds them in) take it: the cotangent they compute for the padded rows reaches only those
  rows, which the list's gradient never reads (it reads by index, under the length);
- a loop's carry or a run-time branch's output does not: ``lax`` makes a new value there, which
  could not be followed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import numpy as np

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
_GRADIENT_SCOPES = ("gradients/", "gradient_tape/")


class PaddedStacks:
    """The padded values of one call, by ``id`` (each kept alive with its padded axis and its stack)."""

    def __init__(self) -> None:
        self.values: dict[int, tuple[Any, int, str]] = {}
        self.crossing: list[bool] = []  # the bodies running, innermost last: whether lax remakes their outputs

    def follow(self, node: Node, args: list[Any], run: Callable[[Node, list[Any]], Optional[list[Any]]]
               ) -> Optional[list[Any]]:
        """``run(node, args)``, refusing it where a padded argument could see its padding."""
        padded = [(k, self.values[id(a)]) for k, a in enumerate(args) if id(a) in self.values]
        if not padded or node.name.startswith(_GRADIENT_SCOPES) or _backward(node):
            outs = run(node, args)
            if node.op in STACK_OPS and outs is not None and args and not getattr(args[0], "static", True):
                self._add(outs[0], 0, node.name)
            return outs
        _, (value, axis, stack) = padded[0]
        # (operands padded alike: of one stack, one length; two stacks' lengths may differ, or one may
        # broadcast, where their padded rows would line up; a constant factor must not span the padded axis)
        alike = len({(p[2], p[1], np.ndim(p[0])) for _, p in padded}) == 1
        keeps = node.op in _ZERO_KEEPING or (node.op in _ZERO_SUMS and alike and len(padded) == len(args)) or (
            node.op == "Mul" and alike and all(k in dict(padded) or _finite_constant(a, np.ndim(value) - axis)
                                               for k, a in enumerate(args)))
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
            if np.ndim(out) == np.ndim(padded[0][1][0]):
                self._add(out, axis, stack)
        return outs

    def leaving(self, outputs: list[Any], where: str) -> None:
        """A body's ``outputs``, which a loop or a run-time branch turns into new values."""
        if self.crossing and self.crossing[-1]:
            for out in outputs:
                if id(out) in self.values:
                    GraphError.PADDED_USE.raise_(node=where, op="a loop's or a branch's output",
                                                 stack=self.values[id(out)][2])

    def _add(self, value: Any, axis: int, stack: str) -> None:
        self.values[id(value)] = (value, axis, stack)


def _backward(node: Node) -> bool:
    """A call of a tape's gradient function (a nested ``tf.function``'s ``__backward_f_12``)."""
    f = node.attr("f") if node.op in ("PartitionedCall", "StatefulPartitionedCall") else None
    name = getattr(f, "name", f)
    return isinstance(name, (str, bytes)) and "__backward_" in (name.decode() if isinstance(name, bytes) else name)


def _finite_constant(value: Any, below: int) -> bool:
    """A finite constant of fewer than ``below`` axes (it broadcasts along the padded axis)."""
    return is_static(value) and np.ndim(value) < below and bool(np.all(np.isfinite(np.asarray(value))))
