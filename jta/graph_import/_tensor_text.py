"""TensorFlow's text of a tensor: ``Tensor::SummarizeValue(max_entries, print_v2)``.

``tf.print`` (``PrintV2``, ``StringFormat``) writes ``print_v2=true``'s: nested brackets, a space between
entries and, between the blocks of an outer dimension, one newline per inner dimension and an indent of
the dimension's depth; where a dimension has more than ``2 * max_entries`` entries its first and last
``max_entries`` show around ``...`` (``-1``: all). ``Assert`` writes ``print_v2=false``'s: the first
``max_entries`` entries in order, each inner dimension's run in brackets with no space between blocks,
``...`` where the entries stop (``[[1 2][3...]...]``).

Entries as ``StrCat`` writes them: floats the shortest of ``%.6g``/``%.9g`` that reads back, doubles of
``%.15g``/``%.17g``, ``nan`` with its sign, subnormals flushed to zero as TensorFlow's threads flush
them, ``half``/``bfloat16`` as floats, bools ``1``/``0``, complex entries ``?``; strings C-escaped
(quoted in ``print_v2``).

    >>> import numpy as np
    >>> from jta.graph_import._tensor_text import summarize_value
    >>> summarize_value(np.float32([[1, 2], [3, 4]]), 3, print_v2=False)
    b'[1 2][3...]...'
    >>> summarize_value(np.float32([0.4, 1e-45]), 3)
    b'[0.4 0]'
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["summarize_value"]


def summarize_value(value: np.ndarray, max_entries: int, print_v2: bool = True) -> bytes:
    """TensorFlow's text of ``value`` (see the module's docstring; ``max_entries`` ``-1``: all)."""
    count = value.size
    limit = min(count if max_entries < 0 else max_entries, count)
    dtype = value.dtype
    if dtype == np.bool_ and limit == 0:  # (SummarizeArray<bool> of no entries: nothing, not even brackets)
        return b""
    if dtype.kind == "c":  # (TensorFlow writes no complex entry: "?" each, the "irregular" case)
        text = " ".join("?" * limit) + ("..." if limit < count else "")
        return (f"[{text}]" if value.ndim and print_v2 else text).encode()
    write = _writer(dtype, quoted=print_v2)
    flat = value.reshape(-1)
    if value.ndim == 0:
        return b" ".join(write(flat[i]) for i in range(limit)) + (b"..." if count > limit else b"")
    out: list[bytes] = []
    if print_v2:
        _dim(0, value.shape, limit, flat, 0, write, out)
    else:
        _one_dim(0, value.shape, limit, flat, [0], write, out)
        out.append(b"..." if count > limit else b"")
    return b"".join(out)


def _dim(dim: int, shape: tuple[int, ...], ends: int, flat: np.ndarray, start: int, write: Any,
         out: list[bytes]) -> None:
    """``PrintOneDimV2``: dimension ``dim`` of the block at ``start``, its first and last ``ends``
    entries (all where it has at most ``2 * ends``)."""
    if dim == len(shape):
        out.append(write(flat[start]))
        return
    out.append(b"[")
    size, step = shape[dim], math.prod(shape[dim + 1:])
    for i in range(min(ends, size)):
        if i > 0:
            _spacing(dim, len(shape), out)
        _dim(dim + 1, shape, ends, flat, start + step * i, write, out)
    if size > 2 * ends:
        _spacing(dim, len(shape), out)
        out.append(b"...")
    for i in range(max(ends, size - ends), size):
        _spacing(dim, len(shape), out)
        _dim(dim + 1, shape, ends, flat, start + step * i, write, out)
    out.append(b"]")


def _spacing(dim: int, rank: int, out: list[bytes]) -> None:
    """``PrintDimSpacing``: a space between entries; between blocks, a newline per inner dimension and
    an indent of the depth."""
    out.append(b" " if dim == rank - 1 else b"\n" * (rank - dim - 1) + b" " * (dim + 1))


def _one_dim(dim: int, shape: tuple[int, ...], limit: int, flat: np.ndarray, at: list[int], write: Any,
             out: list[bytes]) -> None:
    """``PrintOneDim``: dimension ``dim`` from entry ``at[0]`` on, until ``limit`` entries are written."""
    if at[0] >= limit:
        return
    if dim == len(shape) - 1:
        for i in range(shape[dim]):
            if at[0] >= limit:
                out.append(b"..." if dim != 0 else b"")
                return
            out.append((b" " if i > 0 else b"") + write(flat[at[0]]))
            at[0] += 1
        return
    for _ in range(shape[dim]):
        opened = at[0] < limit
        out.append(b"[" if opened else b"")
        _one_dim(dim + 1, shape, limit, flat, at, write, out)
        out.append(b"]" if at[0] < limit or opened else b"")


def _writer(dtype: np.dtype, quoted: bool) -> Any:
    """How ``StrCat`` writes one entry of ``dtype`` (a string quoted in ``print_v2``)."""
    if dtype.kind in "OSU":
        mark = b'"' if quoted else b""
        return lambda s: mark + _c_escape(s if isinstance(s, bytes) else str(s).encode()) + mark
    if dtype == np.bool_:
        return lambda b: b"1" if b else b"0"
    if dtype == np.float64:
        return lambda f: _float(float(f), 15, 17, np.float64)
    if jnp.issubdtype(dtype, jnp.floating):  # (half, bfloat16 and float8 are written as floats)
        return lambda f: _float(float(np.float32(f)), 6, 9, np.float32)
    return lambda i: str(int(i)).encode()


def _float(value: float, digits: int, more: int, kind: Any) -> bytes:
    """``FloatToBuffer``/``DoubleToBuffer``: ``%.{digits}g`` if it reads back as ``value``, else
    ``%.{more}g``."""
    if math.isnan(value):
        return b"-nan" if math.copysign(1.0, value) < 0 else b"nan"
    if math.isinf(value):
        return b"-inf" if value < 0 else b"inf"
    if abs(value) < np.finfo(kind).tiny:  # (a subnormal: TensorFlow's threads flush it to zero)
        value = math.copysign(0.0, value)
    text = f"{value:.{digits}g}"
    return (text if kind(text) == value else f"{value:.{more}g}").encode()


def _c_escape(data: bytes) -> bytes:
    """``absl::Utf8SafeCEscape``: C escapes of the control characters, quotes and backslash (bytes of
    UTF-8 sequences kept)."""
    named = {0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x22: b'\\"', 0x27: b"\\'", 0x5C: b"\\\\"}
    return b"".join(named[c] if c in named else b"\\%03o" % c if c < 0x20 or c == 0x7F else bytes([c])
                    for c in data)
