"""Searches, bins and spectra: ``tf.searchsorted``, ``Bucketize`` (Keras ``Discretization``),
``tf.histogram_fixed_width``, ``tf.linalg.tensor_diag_part`` and the FFTs of ``tf.signal`` (``stft``).

Each is the NumPy or ``jax.numpy`` function of the same meaning, with TensorFlow's conventions:
``searchsorted`` runs row by row over a batch of sorted rows, a histogram clips values outside its
range into the first and last bins, ``RFFT``'s ``fft_length`` crops or pads the innermost axes.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._nodes import Node
from ._ops import OPS, as_numpy, registrar, static_value, xp_of
from ._ops_checks import dims, failed_precondition, invalid

_reg = registrar(OPS)


@_reg("LowerBound", "UpperBound")
def _bound(node: Node, args: list[Any]) -> list[Any]:
    """For each row of ``values``, where its entries would go in the same row of ``sorted_inputs``:
    before equal entries (``LowerBound``, ``side="left"``) or after them (``UpperBound``)."""
    sorted_inputs, values = args
    side = "left" if node.op == "LowerBound" else "right"
    dtype = node.attr("out_type", np.dtype("int32"))
    if xp_of(sorted_inputs, values) is np:
        rows = [np.searchsorted(s, v, side=side) for s, v in zip(sorted_inputs, values, strict=True)]
        return [np.asarray(rows, dtype).reshape(np.shape(values))]
    rows = jax.vmap(lambda s, v: jnp.searchsorted(s, v, side=side))(jnp.asarray(sorted_inputs), jnp.asarray(values))
    return [rows.astype(jax.dtypes.canonicalize_dtype(dtype))]


@_reg("Bucketize")
def _bucketize(node: Node, args: list[Any]) -> list[Any]:
    """The index of each value's bucket: ``i`` where ``boundaries[i - 1] <= x < boundaries[i]``."""
    (x,) = args
    boundaries = np.asarray(node.attr("boundaries", []), np.float32)
    xp = xp_of(x)
    return [as_numpy(xp.searchsorted(xp.asarray(boundaries), x, side="right").astype(np.int32))]


@_reg("HistogramFixedWidth")
def _histogram(node: Node, args: list[Any]) -> list[Any]:
    """Counts of ``values`` in ``nbins`` equal bins over ``value_range``; a value below the range counts
    in the first bin, one at or above its end in the last."""
    values, value_range, nbins = args
    n = int(static_value(node, nbins, "nbins"))
    xp = xp_of(values, value_range)
    low, high = value_range[0], value_range[1]
    scaled = (xp.reshape(values, -1) - low) / (high - low) * n
    bins = xp.clip(xp.floor(scaled), 0, n - 1).astype(np.int32)
    counts = (bins[:, None] == xp.arange(n)[None, :]).sum(axis=0)
    return [as_numpy(counts.astype(node.attr("dtype", np.dtype("int32"))))]


@_reg("DiagPart")
def _diag_part(node: Node, args: list[Any]) -> list[Any]:
    """``x[i, ..., j, i, ..., j]`` of an input of shape ``dims + dims``."""
    (x,) = args
    half = np.ndim(x) // 2
    dims = np.shape(x)[:half]
    size = int(np.prod(dims))
    xp = xp_of(x)
    return [as_numpy(xp.reshape(xp.diagonal(xp.reshape(x, (size, size))), dims))]


@_reg("Diag")
def _diag(node: Node, args: list[Any]) -> list[Any]:
    """``tf.linalg.tensor_diag`` (and the gradient of ``DiagPart``): ``x`` on the diagonal of a tensor of
    shape ``dims + dims``, zeros elsewhere."""
    (x,) = args
    if not np.ndim(x):
        invalid(node, "Input must be at least rank 1, got 0")
    xp = xp_of(x)
    return [as_numpy(xp.reshape(xp.diag(xp.reshape(x, -1)), np.shape(x) * 2))]


@_reg("Cross")
def _cross(node: Node, args: list[Any]) -> list[Any]:
    """``tf.linalg.cross``: the cross products of the 3-vectors on the last axis."""
    a, b = args
    if np.shape(a) != np.shape(b):
        invalid(node, f"Both inputs must be of same shape: [{dims(np.shape(a))}] vs. [{dims(np.shape(b))}]")
    if not np.ndim(a) or np.shape(a)[-1] != 3:
        failed_precondition(node, "Cross-products are only defined for 3-element vectors.")
    return [as_numpy(xp_of(a, b).cross(a, b))]


# -- spectra -------------------------------------------------------------------------------------
_COMPLEX = {"FFT": (jnp.fft.fft, 1), "IFFT": (jnp.fft.ifft, 1), "FFT2D": (jnp.fft.fft2, 2),
            "IFFT2D": (jnp.fft.ifft2, 2), "FFT3D": (jnp.fft.fftn, 3), "IFFT3D": (jnp.fft.ifftn, 3)}
_REAL = {"RFFT": (jnp.fft.rfft, 1), "IRFFT": (jnp.fft.irfft, 1), "RFFT2D": (jnp.fft.rfft2, 2),
         "IRFFT2D": (jnp.fft.irfft2, 2), "RFFT3D": (jnp.fft.rfftn, 3), "IRFFT3D": (jnp.fft.irfftn, 3)}


def _transform(fn: Any, rank: int, x: Any, lengths: Any = None) -> Any:
    if rank == 1:
        return fn(x, n=None if lengths is None else lengths[0], axis=-1)
    return fn(x, s=lengths, axes=tuple(range(-rank, 0)))


@_reg(*_COMPLEX)
def _fft(node: Node, args: list[Any]) -> list[Any]:
    """The (inverse) discrete Fourier transform over the innermost 1, 2 or 3 axes."""
    fn, rank = _COMPLEX[node.op]
    return [_transform(fn, rank, jnp.asarray(args[0]))]


@_reg(*_REAL)
def _real_fft(node: Node, args: list[Any]) -> list[Any]:
    """The transform of a real signal (``RFFT``: the non-negative frequencies) or back to one; the
    innermost axes are cropped or zero-padded to ``fft_length``."""
    fn, rank = _REAL[node.op]
    x, length = jnp.asarray(args[0]), tuple(int(n) for n in static_value(node, args[1], "fft_length"))
    out = _transform(fn, rank, x, length)
    dtype = node.attr("Treal" if node.op.startswith("I") else "Tcomplex")
    return [out.astype(jax.dtypes.canonicalize_dtype(dtype)) if dtype is not None else out]
