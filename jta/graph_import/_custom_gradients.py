"""``tf.custom_gradient`` in an imported function: the gradient TensorFlow registered, run by ``jax.grad``.

``tf.custom_gradient`` marks its outputs (with its inputs and the variables it read) with an
``IdentityN`` whose ``_gradient_op_type`` names a gradient function in TensorFlow's registry: Python
code, not part of the graph. While the function's process holds it, it is traced to a graph here,
as ``tf.saved_model.save`` traces it (``_trace_gradient_functions``), with the ``IdentityN``'s inputs'
types; its captures are tensors of the forward function (found in the evaluator's values) or eager
constants. The ``IdentityN`` then becomes an identity whose ``jax.custom_vjp`` runs that graph, so
``jax.grad`` of the import gives TensorFlow's custom gradient. Where it cannot be traced (a
SavedModel loaded in another process, a capture that is neither) the derivative refuses
(``GraphError.CUSTOM_GRADIENT``) rather than differentiate the forward ops: another gradient.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from ._messages import GraphError
from ._nodes import Node, Tensor, parse, tensor_name

__all__ = ["Gradient", "INPUT", "identity_with_gradient", "registered_gradient"]


@dataclasses.dataclass(frozen=True)
class Gradient:
    """A registered gradient traced to a graph (``nodes``, parsed once, and the function ``library``
    they call): its ``inputs`` take the cotangents of the ``IdentityN``'s outputs, then ``captures``
    (the forward tensors or constants it reads), and ``outputs[k]`` is the tensor of input ``k``'s
    gradient (``None``: zero)."""

    nodes: dict[str, Node]
    library: Any
    inputs: list[str]
    captures: list[Any]
    outputs: list[Optional[Tensor]]


@functools.lru_cache(maxsize=256)
def _traced(kind: str, specs: tuple[tuple[tuple[int, ...], str], ...]) -> Optional[Gradient]:
    import tensorflow as tf
    from tensorflow.python.framework import ops as tf_ops

    try:
        registered = tf_ops.gradient_registry.lookup(kind)
    except LookupError:  # not in this process (a SavedModel loaded elsewhere)
        return None
    try:
        concrete = tf.function(registered).get_concrete_function(
            None, *(tf.TensorSpec(shape, dtype) for shape, dtype in specs))
    except Exception:  # noqa: BLE001 - TensorFlow's own failure to trace it: refused as untraceable
        return None
    structured = tf.nest.flatten(concrete.structured_outputs, expand_composites=False)
    outputs = [None if t is None else tensor_name(t.name) for t in structured]
    graph_def = concrete.graph.as_graph_def()
    return Gradient(parse(graph_def, tf), graph_def.library, [t.op.name for t in concrete.inputs],
                    list(concrete.captured_inputs), outputs)


def registered_gradient(kind: str, args: list[Any]) -> Optional[Gradient]:
    """The gradient registered as ``kind``, traced for ``args`` (the ``IdentityN``'s inputs)."""
    if not all(isinstance(a, (np.ndarray, np.generic, jax.Array, Tracer)) for a in args):
        return None
    specs = tuple((tuple(np.shape(a)), np.dtype(jnp.result_type(a)).name) for a in args)
    return _traced(kind, specs)


_ARRAYS = (np.ndarray, np.generic, jax.Array, Tracer)


def _capture(value: Any, env: Callable[[Tensor, Optional[str]], Any], variables: dict[int, Any]) -> Any:
    """A capture's value: an eager constant's, a captured variable's handle (``variables``: by the
    id of its eager handle), or the forward tensor's (``env``: its value in the function whose graph
    is named so, an array or a handle, or ``None``); ``None``: none. (A gradient called in a loop
    body may read a tensor of the function around the loop: a closure over it.)"""
    if hasattr(value, "numpy") and not hasattr(value, "graph"):  # an eager tensor
        return value.numpy() if value.dtype.is_numpy_compatible else variables.get(id(value))
    try:
        key: Any = (value.op.name, value.value_index)
    except AttributeError:
        return None
    if value.op.type == "Placeholder":  # an input of its graph (a loop body's): the function's input by position
        position = [k for k, t in enumerate(getattr(value.graph, "inputs", ())) if t is value]
        key = (INPUT, position[0], key) if position else key
    return env(key, getattr(value.graph, "name", None))


INPUT = "<input>"  # a key ``(INPUT, k, key)``: a graph's input ``k``, named ``key`` in the graph (not always in its function)


def identity_with_gradient(node: Node, kind: str, args: list[Any], env: Callable[[Tensor, Optional[str]], Any],
                           run: Callable[[Gradient, list[Any], dict[Any, Any]], list[Any]],
                           handles: tuple[type, Callable[[Any], Any], dict[int, Any]]) -> list[Any]:
    """``args`` unchanged, with the derivative TensorFlow registered as ``kind``: ``run(gradient,
    values, variables)`` evaluates its graph on the cotangents and captures, a captured variable's
    handle reading ``variables[handle]``; ``handles``: the handles' type and how to read one (its
    value now, kept for the derivative) and the handles of the captured variables by the id of their
    eager handles. Refusing where it cannot be traced."""
    handle_type, read, by_id = handles
    gradient = registered_gradient(kind, args)
    captures = None if gradient is None else [_capture(c, env, by_id) for c in gradient.captures]
    inexact = [k for k, a in enumerate(args) if isinstance(a, _ARRAYS)
               and jnp.issubdtype(jnp.result_type(a), jnp.inexact)]
    if gradient is None or captures is None or not all(isinstance(c, (*_ARRAYS, handle_type)) for c in captures):
        def refuse(*_: Any) -> Any:
            GraphError.CUSTOM_GRADIENT.raise_(node=node.name, op=node.op, kind=kind)
        return _identity(args, inexact, [], refuse)
    # a variable's handle is not an array: its value now is kept instead, and read through it again
    kept = [jax.lax.stop_gradient(read(c) if isinstance(c, handle_type) else c) for c in captures]
    # TF's gradient stops at the inputs it gives none (the custom gradient's own outputs: its forward
    # ops are not differentiated); JAX must not differentiate them either (a loop's transpose would
    # meet their infinities with zeros: 0 * inf)
    given = [k for k, t in enumerate(gradient.outputs) if t is not None]
    args = [a if k in given or k not in inexact else jax.lax.stop_gradient(a) for k, a in enumerate(args)]

    def backward(cotangents: list[Any], residual: list[Any]) -> list[Any]:
        full = [jnp.zeros(np.shape(a), jnp.result_type(a)) for a in args]
        for k, c in zip(inexact, cotangents, strict=True):
            full[k] = c
        variables = {c: r for c, r in zip(captures, residual, strict=True) if isinstance(c, handle_type)}
        values = [c if isinstance(c, handle_type) else r for c, r in zip(captures, residual, strict=True)]
        grads = dict(zip(given, run(gradient, [*full, *values], variables), strict=True))
        # ``None``: a symbolic zero, not propagated (TF's gradient of the forward ops behind a custom
        # gradient's outputs is None: an instantiated zero would meet their infinities, 0 * inf)
        return [jnp.asarray(grads[k], jnp.result_type(args[k])) if k in grads else None for k in inexact]
    return _identity(args, inexact, kept, backward)


def _identity(args: list[Any], inexact: list[int], residual: list[Any],
              backward: Callable[[list[Any], list[Any]], Any]) -> list[Any]:
    """``args``, their inexact ones through a ``jax.custom_vjp`` identity whose derivative is
    ``backward(cotangents, residual)``."""
    @jax.custom_vjp
    def region(xs: tuple[Any, ...], kept: tuple[Any, ...]) -> tuple[Any, ...]:
        return xs

    def forward(xs: tuple[Any, ...], kept: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        return xs, kept

    def transposed(kept: tuple[Any, ...], cotangents: tuple[Any, ...]) -> tuple[Any, Any]:
        return tuple(backward(list(cotangents), list(kept))), None

    region.defvjp(forward, transposed)
    outs = list(args)
    for k, v in zip(inexact, region(tuple(args[k] for k in inexact), tuple(residual)), strict=True):
        outs[k] = v
    return outs
