"""Train steps of TF2 test programs: the tape inside the ``tf.function`` (TensorFlow's gradient ops, which
the import runs), and the op types of a traced function (TF is imported lazily)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def op_types(fn: Any, *args: Any) -> set[str]:
    """The op types of ``fn``'s graph (a ``tf.function`` traced for ``args``, or a ``ConcreteFunction``) and
    of every function in its library."""
    concrete = fn.get_concrete_function(*args) if hasattr(fn, "get_concrete_function") else fn
    graph = concrete.graph.as_graph_def()
    return {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}


def tape_step(loss: Callable[..., Any], args: Sequence[Any], wrt: Sequence[int], variables: Sequence[Any] = ()) -> Any:
    """A ``tf.function`` of ``args``' specs giving ``[loss(*args), *gradients]``: the tape's gradients with
    respect to the arguments ``wrt`` and ``variables``, dense (an ``IndexedSlices`` converted)."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in args])
    def step(*xs: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([xs[k] for k in wrt])
            value = loss(*xs)
        grads = tape.gradient(value, [xs[k] for k in wrt] + list(variables))
        return [value, *(tf.convert_to_tensor(g) for g in grads)]

    return step
