"""A TensorFlow ``GraphDef`` as a plain node table: names, op types, inputs and decoded attributes.

Parsing is the only step that needs TensorFlow (its protobuf classes and ``make_ndarray``); the
module passed in as ``tf`` is used here and nowhere else. Every attribute is decoded to numpy or
Python (dtypes to ``numpy.dtype``, shapes to tuples with ``None`` for unknown dimensions, tensors
to ``numpy.ndarray``), so the importer's function runs on JAX alone.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

from ._messages import GraphError

Tensor = tuple[str, int]  # (producing node, output index)
Shape = Optional[tuple[Optional[int], ...]]  # None: unknown rank


@dataclasses.dataclass(frozen=True)
class Output:
    """One output of a node as TensorFlow's shape inference sees it: ``dtype`` is a ``numpy.dtype``
    (or a name for resources, variants and strings; None when unknown), ``shape`` a tuple with
    ``None`` for unknown dimensions (None when the rank is unknown)."""

    dtype: Any = None
    shape: Shape = None


@dataclasses.dataclass(frozen=True)
class Node:
    """One graph node: ``inputs`` are data inputs, ``control`` the names after ``^``."""

    name: str
    op: str
    inputs: tuple[Tensor, ...]
    control: tuple[str, ...]
    attrs: dict[str, Any]

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)


def tensor_name(text: str) -> Tensor:
    """``"a/b:1"`` → ``("a/b", 1)``; ``"a/b"`` → ``("a/b", 0)``."""
    name, sep, index = text.rpartition(":")
    if sep and index.isdigit():
        return name, int(index)
    return text, 0


def _shape(proto: Any) -> Shape:
    if proto.unknown_rank:
        return None
    return tuple(None if d.size < 0 else int(d.size) for d in proto.dim)


def _dtype(tf: Any, enum: int) -> Any:
    dtype = tf.dtypes.as_dtype(enum)
    if dtype.is_numpy_compatible and dtype.base_dtype != tf.string:
        return np.dtype(dtype.as_numpy_dtype)
    return dtype.name  # resource, variant, string: a name only


def _attr(tf: Any, value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "list":
        lst = value.list
        for field, fn in (("s", lambda s: s.decode()), ("i", int), ("f", float), ("b", bool),
                          ("type", lambda t: _dtype(tf, t)), ("shape", _shape),
                          ("tensor", tf.make_ndarray), ("func", lambda f: f.name)):  # (func: Case's branches)
            items = getattr(lst, field)
            if len(items):
                return [fn(v) for v in items]
        return []
    if kind == "s":
        return value.s.decode(errors="replace")
    if kind == "type":
        return _dtype(tf, value.type)
    if kind == "shape":
        return _shape(value.shape)
    if kind == "tensor":
        return tf.make_ndarray(value.tensor)
    if kind == "func":
        return value.func.name
    return getattr(value, kind) if kind else None


def parse(graph_def: Any, tf: Any) -> dict[str, Node]:
    """The node table of ``graph_def`` (a ``GraphDef``), in graph order."""
    nodes = {}
    for n in graph_def.node:
        data = tuple(tensor_name(i) for i in n.input if not i.startswith("^"))
        control = tuple(i[1:] for i in n.input if i.startswith("^"))
        nodes[n.name] = Node(n.name, n.op, data, control, {k: _attr(tf, v) for k, v in n.attr.items()})
    return nodes


def outputs(graph_def: Any, nodes: dict[str, Node], tf: Any) -> dict[str, Optional[tuple[Output, ...]]]:
    """Each node's outputs (None where unknown): imported into a ``tf.Graph``, as ``Session.run`` sees
    them, or, when TensorFlow cannot import the graph, counted from the op registry (a ``Placeholder``
    keeps its ``dtype`` and ``shape`` attributes)."""
    try:
        with tf.Graph().as_default() as graph:
            tf.compat.v1.import_graph_def(graph_def, name="")
    except Exception:  # noqa: BLE001 - an op TensorFlow does not know, a shape it cannot infer
        return {name: _registered_outputs(node, tf) for name, node in nodes.items()}
    return {op.name: tuple(Output(_dtype(tf, t.dtype.as_datatype_enum),
                                  None if t.shape.rank is None else tuple(t.shape.as_list()))
                           for t in op.outputs)
            for op in graph.get_operations()}


def _registered_outputs(node: Node, tf: Any) -> Optional[tuple[Output, ...]]:
    from tensorflow.python.framework import op_def_registry

    if node.op == "Placeholder":
        return (Output(node.attr("dtype"), node.attr("shape")),)
    op_def = op_def_registry.get(node.op)
    if op_def is None:
        return None
    count = 0
    for arg in op_def.output_arg:
        if arg.number_attr:
            count += int(node.attr(arg.number_attr, 0))
        elif arg.type_list_attr:
            count += len(node.attr(arg.type_list_attr, []))
        else:
            count += 1
    return (Output(),) * count


def load(graph: Any, tf: Any) -> Any:
    """A ``GraphDef`` from a ``GraphDef``, a ``tf.Graph`` or the path of a binary ``.pb`` file."""
    from google.protobuf.message import DecodeError

    if isinstance(graph, tf.compat.v1.GraphDef):
        return graph
    if isinstance(graph, tf.Graph):
        return graph.as_graph_def()
    if not isinstance(graph, (str, bytes)) and not hasattr(graph, "__fspath__"):
        GraphError.SOURCE.raise_(given=_describe(graph))
    try:
        with open(graph, "rb") as f:
            data = f.read()
    except FileNotFoundError as error:
        raise GraphError.NO_FILE.exception(path=str(error.filename)) from None
    graph_def = tf.compat.v1.GraphDef()
    try:
        graph_def.ParseFromString(data)
    except DecodeError as error:
        raise GraphError.BAD_FILE.exception(path=str(graph), size=len(data), error=error) from None
    if not graph_def.node:
        GraphError.BAD_FILE.raise_(path=str(graph), size=len(data), error="it holds no nodes")
    return graph_def


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80] + '...' if len(text) > 80 else text}"
