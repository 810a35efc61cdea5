"""Run TensorFlow 1.x graphs that use TensorArrays as pure JAX functions: :func:`import_graph_def`.

The graph is parsed once with TensorFlow (``pip install "jta[tf]"``) into a plain node table
(:mod:`jta.graph_import._nodes`); the returned function needs JAX only. Ordinary ops come from jta's own
table (:mod:`jta.graph_import._ops`; not tf2jax's handlers, which import TensorFlow at module level,
read ``NodeDef`` protos and lack the gradient ops these graphs are made of), control flow v1
from :mod:`jta.graph_import._control_flow` (with :mod:`jta.graph_import._frames` and :mod:`jta.graph_import._loops`),
TensorArrays and stacks from :mod:`jta.graph_import._resources` through :mod:`jta.raw_ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

import jax.numpy as jnp

from .._channel.catalogue import Error
from . import _control_flow, _nodes
from ._frames import Graph
from ._loops import Options
from ._ops import OPS
from ._resources import RESOURCE_OPS, Context

__all__ = ["import_graph_def", "supported_ops"]


def supported_ops() -> list[str]:
    """Every op type :func:`import_graph_def` runs, sorted.

    ```python
    >>> from jta.graph_import import supported_ops
    >>> "TensorArrayGradV3" in supported_ops() and "Merge" in supported_ops()
    True

    ```
    """
    return sorted({*OPS, *RESOURCE_OPS, *_control_flow.CONTROL_OPS})


def _tensor(text: str) -> _nodes.Tensor:
    return _nodes.tensor_name(text)


def _needed(nodes: dict[str, _nodes.Node], outputs: list[_nodes.Tensor], fed: set[str]) -> set[str]:
    """Every node the outputs depend on, through data and control edges (loops included)."""
    seen: set[str] = set()
    stack = [t[0] for t in outputs]
    while stack:
        n = stack.pop()
        if n in seen or n not in nodes:
            continue
        seen.add(n)
        if n in fed:
            continue
        node = nodes[n]
        stack.extend(t[0] for t in node.inputs)
        stack.extend(node.control)
    return seen


def _check(graph: Graph, needed: set[str], fed: set[str]) -> None:
    """One error listing every unsupported construct and op type among the needed nodes."""
    known = set(supported_ops())
    unsupported: dict[str, list[str]] = {}
    items = []
    for n in sorted(needed):
        node = graph.nodes[n]
        if node.op not in known:
            unsupported.setdefault(node.op, []).append(n)
        elif node.op in ("Placeholder",) and n not in fed:
            items.append(f"  - Placeholder {n} is needed but not among the inputs")
    for op, names in sorted(unsupported.items()):
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        items.append(f"  - op type {op} ({len(names)} node{'s' * (len(names) > 1)}: {', '.join(names[:3])}{more})")
    items += [f"  - {issue}" for issue in graph.issues]
    if items:
        Error.GRAPH_UNSUPPORTED.raise_(items="\n".join(items))


def import_graph_def(graph_def: Any, inputs: Sequence[str], outputs: Sequence[str], *,
                     stack_capacity: Optional[int] = None, tensor_array_capacity: Optional[int] = None,
                     max_unroll: int = 256) -> Callable[..., list[Any]]:
    """A TensorFlow 1.x graph (control flow v1, TensorArrays, stacks) as a pure JAX function.

    **Arguments:**

    - `graph_def`: a ``GraphDef``, a ``tf.Graph``, or the path of a binary ``.pb`` file.
    - `inputs`: the tensors fed, in the order of the function's arguments (``"x:0"``).
    - `outputs`: the tensors returned, in order.
    - `stack_capacity`: slots of a v1 gradient stack pushed inside a loop whose trip count is not
      static (a static trip count, or a static bound on it such as ``maximum_iterations=``, sizes
      the stacks by itself).
    - `tensor_array_capacity`: the static capacity of ``dynamic_size`` arrays written inside a
      ``lax.scan``/``while_loop`` (without it such a loop is unrolled, when its trip count is static).
    - `max_unroll`: the most steps a static loop that cannot be a ``lax.scan`` is unrolled to.

    **Returns:** ``f(*arrays) -> list of arrays``, working eagerly and under ``jit``, ``vmap``
    and ``grad``. Every op the outputs need is checked first: one ``UnimplementedError`` lists all
    unsupported op types and constructs.

    ```python
    >>> import numpy as np, jax, tensorflow as tf, jta
    >>> g = tf.Graph()
    >>> with g.as_default():
    ...     x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
    ...     y = tf.identity(tf.tanh(x) * 2.0, name="y")
    >>> f = jta.import_graph_def(g.as_graph_def(), inputs=["x:0"], outputs=["y:0"])
    >>> jax.jit(f)(np.ones(3, np.float32))[0].shape
    (3,)

    ```
    """
    try:
        import tensorflow as tf
    except ImportError as e:  # pragma: no cover - the extra is installed in the tests
        raise Error.GRAPH_NEEDS_TF.exception(error=str(e)) from e
    nodes = _nodes.parse(_nodes.load(graph_def, tf), tf)
    in_t, out_t = [_tensor(i) for i in inputs], [_tensor(o) for o in outputs]
    for t, what in [(t, "inputs") for t in in_t] + [(t, "outputs") for t in out_t]:
        if t[0] not in nodes:
            Error.GRAPH_UNKNOWN_TENSOR.raise_(tensor=f"{t[0]}:{t[1]}", what=what)
    fed = {t[0] for t in in_t}
    needed = _needed(nodes, out_t, fed)
    graph = Graph({n: nodes[n] for n in nodes if n in needed}, set(in_t))
    _check(graph, needed, fed)
    array_ids = {n: k for k, n in enumerate(nodes) if nodes[n].op == "TensorArrayV3"}
    options = Options(stack_capacity=stack_capacity, max_unroll=max_unroll)
    names = ", ".join(inputs)

    def run(*args: Any) -> list[Any]:
        if len(args) != len(in_t):
            Error.GRAPH_ARGUMENT_COUNT.raise_(expected=len(in_t), names=names, given=len(args))
        runner = _control_flow.Runner(graph, Context(array_ids, tensor_array_capacity), options)
        values = runner.outputs({t: jnp.asarray(a) for t, a in zip(in_t, args, strict=True)}, out_t)
        return [jnp.asarray(v) for v in values]

    run.__doc__ = f"The imported graph: ({names}) -> [{', '.join(outputs)}]."
    return run
