"""Partial shapes and dtype names, formatted the way TensorFlow prints them."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .._records.catalogue import Error

# A partial shape: ``None`` for unknown rank, else a tuple whose entries are ints or
# ``None`` for unknown dimensions (TensorFlow's ``PartialTensorShape``).
Shape = Optional[tuple[Optional[int], ...]]


def as_shape(shape: Any) -> Shape:
    """Normalise ``None``, an int sequence, or a TF-like shape object to a :data:`Shape`."""
    if shape is None:
        return None
    dims = getattr(shape, "dims", shape)  # tf.TensorShape
    if dims is None:
        return None
    if isinstance(dims, (int, np.integer)):
        return (int(dims),)
    out = []
    for d in dims:
        d = getattr(d, "value", d)
        out.append(None if d is None or (isinstance(d, (int, np.integer)) and d < 0) else int(d))
    return tuple(out)


def fully_defined(shape: Shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


def compatible(a: Shape, b: Shape) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def merge_error(a: Shape, b: Shape) -> Optional[Exception]:
    """TensorFlow's ``PartialTensorShape::MergeWith`` failure for ``a.MergeWith(b)``, or ``None``."""
    if compatible(a, b):
        return None
    assert a is not None and b is not None
    if len(a) != len(b):
        return Error.MERGE_RANKS.exception(a=len(a), b=len(b))
    return Error.MERGE_SHAPES.exception(a=debug_str(a), b=debug_str(b))


def merge(a: Shape, b: Shape) -> Shape:
    """The most specific shape compatible with both (callers check compatibility first)."""
    if a is None:
        return b
    if b is None:
        return a
    return tuple(x if x is not None else y for x, y in zip(a, b, strict=False))


def debug_str(shape: Shape) -> str:
    """TensorFlow's ``PartialTensorShape::DebugString``: ``[2,3]``, ``[?,3]``, ``<unknown>``."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def python_str(shape: Shape) -> str:
    """``str(tf.TensorShape)``: ``(2, 3)``, ``(3,)``, ``(None, 3)``, ``<unknown>``."""
    if shape is None:
        return "<unknown>"
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(d) for d in shape) + ")"


_KERNEL_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "half",
    "bfloat16": "bfloat16",
    "bool": "bool",
    "complex64": "complex64",
    "complex128": "complex128",
}


def kernel_dtype_name(dtype: Any) -> str:
    """Dtype names as TensorFlow's kernels print them (``float``, ``double``, ``int32``, ``string``)."""
    if isinstance(dtype, str):
        return dtype
    np_dtype = np.dtype(dtype)
    name = np_dtype.name
    if np_dtype.kind in "USO":
        return "string"
    return _KERNEL_NAMES.get(name) or name


def dims(shape: Shape) -> tuple[int, ...]:
    """A fully defined shape as ints (callers know it is fully defined)."""
    assert shape is not None, shape
    return tuple(_known(d) for d in shape)


def _known(d: Optional[int]) -> int:
    assert d is not None
    return int(d)
