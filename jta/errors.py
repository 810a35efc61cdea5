"""Exceptions raised by jta, named after TensorFlow's.

TensorFlow reports TensorArray misuse with ``tf.errors.InvalidArgumentError``,
``OutOfRangeError``, ``UnimplementedError`` and ``NotFoundError``
(and ``ResourceExhaustedError`` for allocations that cannot succeed); jta raises
classes of the same names with the same message texts (those of TensorFlow's C++ kernels),
so code and tests written against TensorFlow read the same.
Static problems (shapes, dtypes, Python-int indices) raise at call or trace time;
``ValueError`` and ``TypeError`` are raised where TensorFlow's Python layer does.
"""

from __future__ import annotations

__all__ = [
    "TensorArrayError",
    "InvalidArgumentError",
    "OutOfRangeError",
    "UnimplementedError",
    "NotFoundError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "InternalError",
]


class TensorArrayError(Exception):
    """Base class of the TensorFlow-named errors raised by jta."""


class InvalidArgumentError(TensorArrayError):
    """An argument (index, shape, dtype, lengths) is invalid for the array's state."""


class OutOfRangeError(TensorArrayError):
    """An index lies outside the array (TensorFlow's eager mode uses this class)."""


class UnimplementedError(TensorArrayError):
    """The request is valid TensorFlow but cannot be served (e.g. size-zero stack of unknown shape)."""


class NotFoundError(TensorArrayError):
    """A handle names no array in the state."""


class ResourceExhaustedError(TensorArrayError):
    """A buffer would not fit in the device's memory (jta allocates every slot up front)."""


class FailedPreconditionError(TensorArrayError):
    """An input is not in the state the op requires (an image of other than three channels for a color
    conversion, vectors of other than three elements for a cross product)."""


class InternalError(TensorArrayError):
    """An input breaks an invariant a kernel relies on, which TensorFlow reports as internal (a sparse
    tensor's entry outside its dense shape in ``tf.sparse.reduce_sum``)."""
