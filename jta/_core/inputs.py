"""User inputs made canonical: dtypes, static integers, index shapes, and values to write."""

from __future__ import annotations

import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .._records.catalogue import Error
from . import shapes


def canonical_dtype(dtype: Any) -> np.dtype:
    """The dtype JAX stores for ``dtype`` (accepts NumPy, JAX and ``tf.DType`` objects)."""
    dtype = getattr(dtype, "as_numpy_dtype", dtype)
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


_NARROW = {"int64": "int32", "uint64": "uint32", "float64": "float32", "complex128": "complex64"}


def element_dtype(dtype: Any) -> np.dtype:
    """The dtype of a new array: a real dtype, stored as asked (64-bit types need x64)."""
    if dtype is None:
        Error.NOT_A_DTYPE.raise_(dtype=dtype)
    if dtype is float:  # tf.as_dtype(float) is float32, whatever NumPy says
        dtype = np.float32
    try:
        wanted = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    except TypeError:
        Error.NOT_A_DTYPE.raise_(dtype=dtype)
    if wanted.kind not in "biufc" and wanted.name != "bfloat16":
        Error.NOT_A_DTYPE.raise_(dtype=dtype)
    stored = canonical_dtype(wanted)
    if stored != wanted:  # e.g. int64 without x64: values would silently wrap
        Error.WIDE_DTYPE_WITHOUT_X64.raise_(dtype=wanted.name, narrow=_NARROW.get(wanted.name, stored.name))
    return stored


def _python_name(x: Any) -> str:
    return type(x).__name__


def widened(x: Any) -> Any:
    """Integer indices narrower than 32 bits as int32, which holds all their values: in their own
    dtype a size they are compared with, or the row a buffer's ``dynamic_update_slice`` clamps them
    to, wraps (an int8 index into 200 rows: a false range error, or XLA writing past the buffer)."""
    dtype = np.dtype(x.dtype)
    if dtype.kind in "iu" and dtype.itemsize < 4:
        return x.astype(np.int32)
    return x


def as_indices(x: Any, op: str, param: str) -> Any:
    """An index argument as TensorFlow's op wrappers accept it: a Python int or bool (and lists of
    them), a NumPy or JAX integer value, or an integral NumPy float. Anything else raises TF's
    ``TypeError``/``ValueError``. Integer JAX values keep their dtype (int64 under x64) so that
    range checks come before any narrowing."""
    if x is None:
        Error.NONE_ARGUMENT.raise_(param=param)
    if isinstance(x, (list, tuple)) and any(isinstance(v, (jax.Array, Tracer)) for v in x):
        x = jnp.stack([jnp.asarray(v) for v in x])
    if isinstance(x, (jax.Array, Tracer)):
        if not jnp.issubdtype(x.dtype, jnp.integer):
            Error.TENSOR_NOT_INT32.raise_(param=param, op=op, dtype=np.dtype(x.dtype).name)
        return widened(x)
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype.kind == "b":
            return x.astype(np.int32)
        if x.dtype.kind in "iu":
            return widened(x)
        if x.dtype.kind == "f" and np.all(np.isfinite(x)) and np.all(x == np.round(x)):
            return x.astype(np.int64)
        Error.TENSOR_NOT_INT32.raise_(param=param, op=op, dtype=x.dtype.name)
    flat = list(np.ravel(np.asarray(x, dtype=object))) if isinstance(x, (list, tuple)) else [x]
    for element in flat:
        if element is None:
            Error.NONE_ARGUMENT.raise_(param=param)
        if not isinstance(element, (int, np.integer, np.bool_)):
            Error.PYTHON_NOT_INT32.raise_(param=param, op=op, value=x, type=_python_name(x), element=element,
                                          element_type=_python_name(element))
    try:
        arr = np.asarray(x)
    except (OverflowError, ValueError):
        arr = np.asarray(x, dtype=object)
    if arr.dtype == object:  # beyond int64
        Error.PYTHON_NOT_INT32.raise_(param=param, op=op, value=x, type=_python_name(x), element=flat[0],
                                      element_type=_python_name(flat[0]))
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int32)
    return int(arr) if arr.ndim == 0 and not isinstance(x, np.ndarray) else arr


def length_dtype() -> Any:
    """TensorFlow's int64 for lengths; int32 unless x64 is enabled."""
    return jax.dtypes.canonicalize_dtype(np.int64)


def static_int(x: Any) -> Optional[int]:
    """The Python int of ``x`` if it is known at trace time, else ``None``."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, Tracer):
        return None
    if isinstance(x, (np.ndarray, jax.Array)) and np.ndim(x) == 0:
        return int(x)
    return None


def static_ints(x: Any) -> Optional[np.ndarray]:
    """``x`` as an int64 NumPy array if it is known at trace time, else ``None``: TensorFlow's cast
    of split lengths to int64 (a uint64 past 2**63 wraps to a negative length there)."""
    return None if isinstance(x, Tracer) else np.asarray(x).astype(np.int64)


def static_indices(x: Any) -> Optional[np.ndarray]:
    """Indices known at trace time as a NumPy array of their values as given, else ``None``: int64,
    or uint64 when one is past int64 (a uint64 index is reported as itself, as ``read`` and
    ``write`` report a scalar one; traced ones are, too)."""
    if isinstance(x, Tracer):
        return None
    arr = np.asarray(x)
    if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
        return arr
    return arr.astype(np.int64)


def tf_lengths(lengths: Any) -> Any:
    """Traced split lengths as TensorFlow's ``TensorArray.split`` casts them to int64: as they
    are (a wider type holds them, or they are checked in their own width), except a uint64 past
    2**63, which is the negative int64 of its bits there (as :func:`static_ints` makes it)."""
    lengths = jnp.asarray(lengths)
    return lengths.astype(np.int64) if lengths.dtype == np.uint64 else lengths


def check_scalar_index(index: Any) -> None:
    if np.ndim(index) != 0:
        Error.INDEX_NOT_SCALAR.raise_(shape=shapes.debug_str(np.shape(index)))


def check_dtype(array_dtype: np.dtype, value_dtype: Any) -> None:
    """The kernels' dtype check of a value to write."""
    if value_dtype != array_dtype:
        Error.WRITE_DTYPE.raise_(dtype=shapes.kernel_dtype_name(array_dtype), given=shapes.kernel_dtype_name(value_dtype))


def packed(value: Any) -> Any:
    """A list or tuple holding tensors as one tensor (TF's auto-packing; traced ones too), else
    ``value``: what a value argument's shape is read from."""
    if isinstance(value, (list, tuple)) and any(isinstance(v, jax.Array) for v in jax.tree_util.tree_leaves(value)):
        return jnp.array(value)
    return value


def convert(value: Any, dtype: np.dtype, preferred: bool) -> jax.Array:
    """Convert like ``tf.convert_to_tensor``; Python values take ``dtype`` as TF's graph mode converts.

    ``preferred`` is the Python API's ``preferred_dtype=dtype``; the raw ops infer the dtype
    from the value as TensorFlow's op wrappers do (``3`` is int32, ``3.0`` float32).
    """
    kind_order = "bifc"
    target = "f" if dtype == jnp.bfloat16 else "i" if dtype.kind == "u" else dtype.kind
    if value is None:
        Error.NONE_VALUE.raise_()
    value = packed(value)
    if isinstance(value, jax.Array):  # a tensor: its dtype is what it is ...
        arr = value
        weak = getattr(getattr(value, "aval", value), "weak_type", False)  # ... unless a traced Python scalar
        if preferred and weak and arr.dtype.kind in kind_order and target in kind_order and (
                kind_order.index(arr.dtype.kind) <= kind_order.index(target)):
            return arr.astype(dtype)
    else:
        python = not isinstance(value, (np.ndarray, np.generic))
        if python and isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63 \
                and target in "fc":
            try:
                value = float(value)  # beyond int64: TF converts it to the float array's dtype
            except OverflowError:
                Error.INT_TOO_LARGE.raise_(bits=value.bit_length(), dtype=shapes.kernel_dtype_name(dtype))
        try:
            arr = np.asarray(value)
        except (OverflowError, ValueError, TypeError):
            Error.NOT_CONVERTIBLE.raise_(value=value)
        if arr.dtype.kind == "O":
            Error.NOT_CONVERTIBLE.raise_(value=value)
        if arr.dtype.kind in "US":
            check_dtype(dtype, np.dtype(np.str_))
        # TF's conversion of Python values (convert_to_tensor with preferred_dtype): bool < int <
        # float < complex, unsigned ints count as ints and bfloat16 as a float; integers wrap
        # (300 -> uint8 44), as in TF. A NumPy value is cast to the array's dtype whatever it is
        # (TF's constant conversion is NumPy's astype); the raw ops keep a NumPy value's dtype.
        if preferred and not python:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # complex -> real drops .imag
                arr = arr.astype(dtype)
        elif preferred and arr.dtype.kind in kind_order and target in kind_order and (
                kind_order.index(arr.dtype.kind) <= kind_order.index(target)):
            arr = arr.astype(dtype)
        elif not python:
            pass
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)  # TF's default for Python floats
        elif arr.dtype == np.int64 and np.all(np.abs(arr) < 2**31):
            arr = arr.astype(np.int32)
    if canonical_dtype(arr.dtype) != dtype:  # named by the value's own dtype, as TF does (complex128)
        Error.WRITE_DTYPE.raise_(dtype=shapes.kernel_dtype_name(dtype), given=shapes.kernel_dtype_name(arr.dtype))
    return jnp.asarray(arr, dtype)
