"""Run TensorFlow 1.x graphs that use TensorArrays as pure JAX functions: :func:`import_graph_def`.

The graph is parsed once with TensorFlow (``pip install "jta[tf]"``) into a plain node table
(:mod:`jta.graph_import._nodes`); the returned function needs JAX only. Ordinary ops come from jta's own
table (:mod:`jta.graph_import._ops`; not tf2jax's handlers, which import TensorFlow at module level,
read ``NodeDef`` protos and lack the gradient ops these graphs are made of), control flow v1
from :mod:`jta.graph_import._control_flow` (with :mod:`jta.graph_import._frames` and :mod:`jta.graph_import._loops`),
TensorArrays and stacks from :mod:`jta.graph_import._resources` through :mod:`jta.raw_ops`.

TF2 programs (a ``tf.function``, a SavedModel) come in through :func:`import_function` and
:func:`import_saved_model` (:mod:`jta.graph_import._tf2`): functional control flow and the function
library run in :mod:`jta.graph_import._functions` and :mod:`jta.graph_import._tf2_loops`, TensorLists in
:mod:`jta.graph_import._lists`, with the same table of ordinary ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._records.catalogue import Error

# The _ops_* modules are imported for what they do: they register their ops in OPS.
from . import (  # noqa: F401
    _control_flow,
    _nodes,
    _ops_color,
    _ops_ctc,
    _ops_gamma,
    _ops_image,
    _ops_linalg,
    _ops_logging,
    _ops_lookup,
    _ops_nn,
    _ops_projective,
    _ops_random,
    _ops_resize,
    _ops_search,
    _ops_segments,
    _ops_sizes,
    _ops_slices,
    _ops_sparse,
    _ops_special,
    _ops_tf2jax,
    _ops_tridiagonal,
    _ops_xla,
    _unsupported,
)
from ._frames import Graph
from ._loops import Options, Unstable
from ._messages import GraphError
from ._ops import OPS
from ._resources import RESOURCE_OPS, Context
from ._tf2 import import_function, import_saved_model, supported_tf2_ops

__all__ = ["import_function", "import_graph_def", "import_saved_model", "supported_ops", "supported_tf2_ops"]


def supported_ops() -> list[str]:
    """Every op type :func:`import_graph_def` runs, sorted.

    ```python
    >>> from jta.graph_import import supported_ops
    >>> "TensorArrayGradV3" in supported_ops() and "Merge" in supported_ops()
    True

    ```
    """
    return sorted({*OPS, *RESOURCE_OPS, *_control_flow.CONTROL_OPS})


def _tensors(names: Any, what: str) -> list[_nodes.Tensor]:
    """``names`` (a sequence of ``"node:index"``) as tensors; a lone string or a non-name is refused."""
    listed = list(names) if isinstance(names, Iterable) and not isinstance(names, (str, bytes)) else None
    if listed is None or not all(isinstance(n, str) for n in listed):
        GraphError.TENSOR_NAMES.raise_(what=what, given=f"{type(names).__name__} {names!r}"[:200])
    return [_nodes.tensor_name(n) for n in listed]


def _check_tensors(nodes: dict[str, _nodes.Node], outputs: dict[str, Optional[tuple[_nodes.Output, ...]]],
                   tensors: list[_nodes.Tensor], what: str) -> None:
    """Each tensor names a node of the graph and one of its outputs (as ``Session.run`` checks)."""
    for node, index in tensors:
        if node not in nodes:
            GraphError.UNKNOWN_TENSOR.raise_(tensor=f"{node}:{index}", what=what)
        count = outputs.get(node)
        if count is not None and index >= len(count):
            GraphError.NO_OUTPUT.raise_(what=what, tensor=f"{node}:{index}", node=node, count=len(count))


def _feed(value: Any, tensor: str, output: _nodes.Output) -> Any:
    """``value`` as ``Session.run`` feeds it: converted to the tensor's dtype and refused when its
    shape is not compatible with the tensor's static one (traced values too: shapes are static)."""
    dtype = output.dtype if isinstance(output.dtype, np.dtype) else None
    if isinstance(value, jax.Array):  # traced too: converted in the computation (64-bit types as JAX has them)
        target = None if dtype is None else jax.dtypes.canonicalize_dtype(dtype)
        array = value if target is None or value.dtype == target else value.astype(target)
    else:
        if dtype is not None and isinstance(value, int) and \
                dtype.type(np.array(value).astype(dtype)) != value:
            GraphError.FEED_INT.raise_(value=value, kind=type(value), dtype=dtype.type)
        array = np.asarray(value) if dtype is None else (
            np.asarray(value).astype(dtype) if np.issubdtype(dtype, np.number) else np.asarray(value, dtype))
    shape = tuple(np.shape(array))
    expected = output.shape
    if expected is not None and (len(shape) != len(expected) or
                                 any(e is not None and e != d for d, e in zip(shape, expected, strict=True))):
        GraphError.FEED_SHAPE.raise_(shape=shape, tensor=tensor, expected=_shape_text(expected))
    return jnp.asarray(array)


def _shape_text(shape: tuple[Optional[int], ...]) -> str:
    """A static shape as ``str(tf.TensorShape)`` writes it: ``(None, 3)``, ``(4,)``, ``()``."""
    return str(tuple(shape))


_TRACED_ARRAY_LIMITS = (Error.TRACED_INDEX_NEEDS_SHAPE, Error.SIZE_ONLY_AT_RUN_TIME, Error.TRACED_SPLIT_UNEQUAL,
                        Error.TRACED_SPLIT_NEVER_FITS)


class _Runner(_control_flow.Runner):
    """The graph runner, whose internal failures name the node or loop that hit them."""

    def node(self, node: _nodes.Node, env: dict[_nodes.Tensor, Any], res: Any, probe: bool) -> Any:
        try:
            return super().node(node, env, res, probe)
        except (KeyError, AttributeError, IndexError, Unstable) as error:
            raise GraphError.INTERNAL.exception(node=node.name, op=node.op, error=_error_text(error)) from error
        except ValueError as error:
            # jta's own limits of traced TensorArrays name the array by its internal handle: here they
            # name the node, the array's TensorArrayV3 node and what to do instead.
            handle = getattr(error, "jta_array", None)  # the array's internal handle
            if handle is None or getattr(error, "jta_error", None) not in _TRACED_ARRAY_LIMITS:
                raise
            array = self._array_node(handle.split("@")[0])
            named = handle if array == repr(handle.split("@")[0]) else f"node {array}"
            raise GraphError.TRACED_ARRAY.exception(
                node=node.name, op=node.op, array=f"the gradient array of {named}" if "@" in handle else named,
                error=str(error).split(": ", 1)[-1]) from error

    def loop(self, name: str, outer: dict[_nodes.Tensor, Any], res: Any, probe: bool) -> Any:
        try:
            return super().loop(name, outer, res, probe)
        except (KeyError, AttributeError, IndexError, Unstable) as error:
            raise GraphError.INTERNAL.exception(node=name, op="while loop", error=_error_text(error)) from error


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:300]}"


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
        raise GraphError.NEEDS_TF.exception(error=str(e)) from e
    in_t, out_t = _tensors(inputs, "inputs"), _tensors(outputs, "outputs")
    graph_def = _nodes.load(graph_def, tf)
    nodes = _nodes.parse(graph_def, tf)
    node_outputs = _nodes.outputs(graph_def, nodes, tf)
    _check_tensors(nodes, node_outputs, in_t, "inputs")
    _check_tensors(nodes, node_outputs, out_t, "outputs")
    specs = [(node_outputs.get(name) or (_nodes.Output(),) * (index + 1))[index] for name, index in in_t]
    fed = {t[0] for t in in_t}
    needed = _needed(nodes, out_t, fed)
    graph = Graph({n: nodes[n] for n in nodes if n in needed}, set(in_t))
    _unsupported.check(graph, needed, fed, set(supported_ops()))
    array_ids = {n: k for k, n in enumerate(nodes) if nodes[n].op == "TensorArrayV3"}
    options = Options(stack_capacity=stack_capacity, max_unroll=max_unroll)
    names = ", ".join(f"{n}:{k}" for n, k in in_t)

    def run(*args: Any) -> list[Any]:
        if len(args) != len(in_t):
            GraphError.ARGUMENT_COUNT.raise_(expected=len(in_t), names=names, given=len(args))
        feeds = {t: _feed(a, f"{t[0]}:{t[1]}", spec) for t, a, spec in zip(in_t, args, specs, strict=True)}
        runner = _Runner(graph, Context(array_ids, tensor_array_capacity), options)
        return [jnp.asarray(v) for v in runner.outputs(feeds, out_t)]

    run.__doc__ = f"The imported graph: ({names}) -> [{', '.join(f'{n}:{k}' for n, k in out_t)}]."
    return run
