"""User inputs made canonical: dtypes, static integers, index shapes, and values to write."""

from __future__ import annotations

import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from . import _shapes as S
from ._catalogue import Error


def canonical_dtype(dtype: Any) -> np.dtype:
    """The dtype JAX stores for ``dtype`` (accepts NumPy, JAX and ``tf.DType`` objects)."""
    dtype = getattr(dtype, "as_numpy_dtype", dtype)
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


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
    """``x`` as an int64 NumPy array if it is known at trace time, else ``None``."""
    return None if isinstance(x, Tracer) else np.asarray(x).astype(np.int64)


def check_scalar_index(index: Any) -> None:
    if np.ndim(index) != 0:
        Error.INDEX_NOT_SCALAR.raise_(shape=S.debug_str(np.shape(index)))


def check_dtype(array_dtype: np.dtype, value_dtype: Any) -> None:
    """The kernels' dtype check of a value to write."""
    if value_dtype != array_dtype:
        Error.WRITE_DTYPE.raise_(dtype=S.kernel_dtype_name(array_dtype), given=S.kernel_dtype_name(value_dtype))


def convert(value: Any, dtype: np.dtype, preferred: bool) -> jax.Array:
    """Convert like ``tf.convert_to_tensor``; Python values take ``dtype`` as TF's graph mode converts.

    ``preferred`` is the Python API's ``preferred_dtype=dtype``; the raw ops infer the dtype
    from the value as TensorFlow's op wrappers do (``3`` is int32, ``3.0`` float32).
    """
    if isinstance(value, jax.Array):  # a tensor: its dtype is what it is
        arr = value
    else:
        python = not isinstance(value, (np.ndarray, np.generic))
        arr = np.asarray(value)
        if arr.dtype.kind in "USO":
            check_dtype(dtype, np.dtype(np.str_))
        # TF's conversion of Python values (convert_to_tensor with preferred_dtype): bool < int <
        # float < complex, unsigned ints count as ints and bfloat16 as a float; integers wrap
        # (300 -> uint8 44), as in TF. A NumPy value is cast to the array's dtype whatever it is
        # (TF's constant conversion is NumPy's astype); the raw ops keep a NumPy value's dtype.
        kind_order = "bifc"
        target = "f" if dtype == jnp.bfloat16 else "i" if dtype.kind == "u" else dtype.kind
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
        Error.WRITE_DTYPE.raise_(dtype=S.kernel_dtype_name(dtype), given=S.kernel_dtype_name(arr.dtype))
    return jnp.asarray(arr, dtype)
