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

Tensor = tuple[str, int]  # (producing node, output index)


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


def _shape(proto: Any) -> Optional[tuple[Optional[int], ...]]:
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
                          ("tensor", tf.make_ndarray)):
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


def load(graph: Any, tf: Any) -> Any:
    """A ``GraphDef`` from a ``GraphDef``, a ``tf.Graph`` or the path of a binary ``.pb`` file."""
    if isinstance(graph, tf.Graph):
        return graph.as_graph_def()
    if isinstance(graph, (str, bytes)) or hasattr(graph, "__fspath__"):
        graph_def = tf.compat.v1.GraphDef()
        with open(graph, "rb") as f:
            graph_def.ParseFromString(f.read())
        return graph_def
    return graph
