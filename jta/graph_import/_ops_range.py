"""``tf.range`` (``Range``): its length is its shape, so its arguments must be known while tracing, or
concrete (an eager call); under ``jta.checked`` an integer range of a static ``delta`` may have bounds the
run decides, and its length is learned (as ``Where``'s count is). TensorFlow's checks of the arguments
come with its texts, from compiled code too (codes 447, 448)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core import capacities
from .._delivery import value_ops
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, registrar, static_value

_reg = registrar(OPS)


@_reg("Range")
def _range(node: Node, args: list[Any]) -> list[Any]:
    """``tf.range``, with TensorFlow's checks. Its length is its shape: static values, or under
    ``jta.checked`` an integer range of a static ``delta`` whose length the run decides (learned, as
    ``Where``'s count is)."""
    start, limit, delta = args
    first, last, step = (_known(a) for a in args)
    if step is None or (first is None or last is None) and not jnp.issubdtype(jnp.result_type(start), jnp.integer):
        static_value(node, delta if step is None else start if first is None else limit, "start, limit and delta")
        raise AssertionError  # unreachable: static_value raised (the value is traced)
    step = step.item()
    if step == 0:
        GraphError.LIST_MISUSE.raise_(node=node.name, op=node.op, error=f"Requires delta != 0: {_number(step)}")
    check = GraphError.RANGE_UP if step > 0 else GraphError.RANGE_DOWN
    if first is not None and last is not None:
        if (first > last) if step > 0 else (first < last):
            check.raise_(name=node.name, op=node.op, start=_number(first.item()), limit=_number(last.item()))
        return [np.arange(first.item(), last.item(), step).astype(node.attr("Tidx", first.dtype))]
    first, last = jnp.asarray(start), jnp.asarray(limit)
    count = jnp.maximum((last - first + step - np.sign(step)) // step, 0)
    rows = capacities.learned_rows(count, node.name, stack=False)
    if rows is None:
        static_value(node, start if _known(start) is None else limit,
                     "start and limit (the number of elements is the result's shape; jta.checked learns it at "
                     "run time)")
        raise AssertionError  # unreachable: static_value raised
    value_ops.report(node.name, first > last if step > 0 else first < last, check, first, last, extra={"op": node.op})
    dtype = jax.dtypes.canonicalize_dtype(node.attr("Tidx", first.dtype))
    return [(first + step * jnp.arange(rows)).astype(dtype)]


def _known(v: Any) -> Any:
    """``v`` as NumPy where it is known while tracing or concrete (an eager call), else None."""
    try:
        return np.asarray(v)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _number(v: Any) -> str:
    """A number as TensorFlow's messages write it (``5``, ``0.5``)."""
    return f"{v:g}" if isinstance(v, float) else str(v)
