"""More resizes: ``tf.image.resize(method="area")`` (``ResizeArea``) and the kernel resizes of
``ScaleAndTranslate`` (``tf.image.resize`` with ``lanczos3``, ``lanczos5``, ``gaussian``, ``mitchellcubic``,
or ``antialias=True``; ``tf.raw_ops.ScaleAndTranslate``'s box, triangle, Keys cubic and Lanczos-1 too) with
its gradient op, computed as TensorFlow's CPU kernels compute them, bit for bit.

An area resize averages the input pixels each output pixel covers, a partly covered pixel weighted by
its covered fraction. The weights are TensorFlow's (``CachedInterpolation``: float32 positions
``x * scale``, a first and a last weight, whole pixels between), summed in its order: along ``x`` in
each covered row, the rows weighted and summed in order, times ``1 / (height_scale * width_scale)``.
TensorFlow registers no gradient for ``ResizeArea`` (a gradient that reaches it raises TensorFlow's
``LookupError``: :mod:`._no_gradient`).

``ScaleAndTranslate`` samples each axis through spans: per output position, the source pixels within the
kernel's radius (widened by ``1 / scale`` when ``antialias`` shrinks) and their normalized weights, computed
here in NumPy float32 as TensorFlow's ``ComputeSpansCore`` computes them (its Lanczos kernels call the C
library's ``sinf``, loaded here too). Rows are gathered first, then columns, each a sum in span order. The
derivative is TensorFlow's ``ScaleAndTranslateGrad``: the same gathers over the transposed spans
(``ComputeGradSpansCore``), so ``jax.grad`` and the imported train step agree with TensorFlow bit for bit.
XLA's fused products are kept apart with :func:`._ops_image.stored`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._nodes import Node
from ._ops import OPS, registrar, result_dtype, static_value
from ._ops_checks import dims, invalid
from ._ops_image import resize_scale, resize_size, stored

_reg = registrar(OPS)
_F32 = np.float32


def _area_weights(in_size: int, out_size: int, scale: np.float32) -> tuple[np.ndarray, np.ndarray]:
    """Per output position, the covered input indices (clamped; ``(out, taps)``) and their weights in
    TensorFlow's order (0 past an output's last tap): the first and last partial, whole ones between."""
    rows = []
    for x in range(out_size):
        start_at, end_at = _F32(x) * scale, _F32(x + 1) * scale
        start, end = int(np.floor(start_at)), int(np.ceil(end_at))

        def weight(v: int, start_at: np.float32 = start_at, end_at: np.float32 = end_at) -> np.float32:
            if v < start_at:
                return scale if v + 1 > end_at else _F32(v + 1) - start_at
            return end_at - _F32(v) if v + 1 > end_at else _F32(1)

        taps = [(start, weight(start))]
        if start + 1 != end:
            taps += [(v, _F32(1)) for v in range(start + 1, end - 1)] + [(end - 1, weight(end - 1))]
        rows.append(taps)
    width = max(len(t) for t in rows)
    index = np.zeros((out_size, width), np.int64)
    weights = np.zeros((out_size, width), np.float32)
    for k, taps in enumerate(rows):
        index[k, :len(taps)] = [min(max(v, 0), in_size - 1) for v, _ in taps]
        weights[k, :len(taps)] = [w for _, w in taps]
    return index, weights


@_reg("ResizeArea")
def _resize_area(node: Node, args: list[Any]) -> list[Any]:
    """``[batch, height, width, channels]`` float32: each output pixel the covered-area average."""
    images, size = args
    x = jnp.asarray(images)
    if x.ndim != 4:
        invalid(node, f"input must be 4-dimensional{dims(x.shape)}")
    out_h, out_w = resize_size(node, size)
    align = bool(node.attr("align_corners", False))
    h_scale, w_scale = resize_scale(x.shape[1], out_h, align), resize_scale(x.shape[2], out_w, align)
    rows, row_w = _area_weights(x.shape[1], out_h, h_scale)
    cols, col_w = _area_weights(x.shape[2], out_w, w_scale)
    x = jax.lax.optimization_barrier(x.astype(_F32))  # (see _ops_color._unfolded)
    total: Any = None
    for i in range(rows.shape[1]):  # (each covered row: its sum along x, weighted)
        line = x[:, rows[:, i]]
        along: Any = None
        for k in range(cols.shape[1]):
            w = col_w[:, k][:, None]  # (1 between the ends: its product is exact)
            term = jnp.where(w != 0, stored(line[:, :, cols[:, k]] * w), _F32(0))
            along = term if along is None else along + term
        row = jnp.where(row_w[:, i][:, None, None] != 0, stored(along * row_w[:, i][:, None, None]), _F32(0))
        total = row if total is None else total + row
    scale = _F32(1.0 / float(h_scale * w_scale))
    return [stored(total * scale)]


# -- ScaleAndTranslate (scale_and_translate_op.cc, sampling_kernels.h) -------------------------------
def _libm_sinf() -> Any:
    """The C library's ``sinf``, which TensorFlow's kernel calls (``std::sin`` of a float), where it loads."""
    try:
        import ctypes
        import ctypes.util

        sinf = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6").sinf
        sinf.restype, sinf.argtypes = ctypes.c_float, [ctypes.c_float]
        return sinf
    except (OSError, AttributeError, TypeError):
        return None


_SINF = _libm_sinf()


def _sinf(x: np.float32) -> np.float32:
    """``sinf(x)``: the C library's, else the correctly rounded value (which it is but for a few ulp)."""
    return _F32(_SINF(float(x))) if _SINF is not None else _F32(np.sin(np.float64(x)))


def _lanczos(radius: float) -> Any:
    r, pi = _F32(radius), _F32(3.14159265359)

    def kernel(x: np.float32) -> np.float32:
        if x > r:
            return _F32(0)
        if float(x) <= 1e-3:
            return _F32(1)
        return r * _sinf(pi * x) * _sinf(pi * x / r) / (pi * pi * x * x)
    return kernel


def _gaussian(x: np.float32) -> np.float32:
    sigma = float(_F32(1.5) / _F32(3))
    return _F32(0) if x >= _F32(1.5) else _F32(np.exp(float(-x * x) / (2.0 * sigma * sigma)))


def _keys_cubic(x: np.float32) -> np.float32:
    if x >= 2:
        return _F32(0)
    if x >= 1:
        return ((_F32(-0.5) * x + _F32(2.5)) * x - _F32(4)) * x + _F32(2)
    return ((_F32(1.5) * x - _F32(2.5)) * x) * x + _F32(1)


def _mitchell_cubic(x: np.float32) -> np.float32:
    if x >= 2:
        return _F32(0)
    if x >= 1:
        return (((_F32(-7) / _F32(18)) * x + _F32(2)) * x - _F32(10) / _F32(3)) * x + _F32(16) / _F32(9)
    return (((_F32(7) / _F32(6)) * x - _F32(2)) * x) * x + _F32(8) / _F32(9)


# name -> (kernel of |x|, radius)
_KERNELS: dict[str, tuple[Any, float]] = {
    "lanczos1": (_lanczos(1), 1.0), "lanczos3": (_lanczos(3), 3.0), "lanczos5": (_lanczos(5), 5.0),
    "gaussian": (_gaussian, 1.5), "keyscubic": (_keys_cubic, 2.0), "mitchellcubic": (_mitchell_cubic, 2.0),
    "box": (lambda x: _F32(1) if x < _F32(0.5) else _F32(0.5) if x == _F32(0.5) else _F32(0), 1.0),
    "triangle": (lambda x: _F32(1) - x if x < _F32(1) else _F32(0), 1.0)}


def _spans(kernel_type: str, out_size: int, in_size: int, scale: float, translate: float,
           antialias: bool) -> tuple[np.ndarray, np.ndarray]:
    """TensorFlow's ``ComputeSpansCore``: per output position its first source index and ``span_size``
    weights (float32, as the kernel rounds them; an output whose sample lies outside the image has none)."""
    kernel, radius = _KERNELS[kernel_type]
    inv_scale = _F32(1.0 / float(_F32(scale)))
    inv_translate = -inv_scale * _F32(translate)
    kernel_scale = max(inv_scale, _F32(1)) if antialias else _F32(1)
    reach = _F32(radius) * kernel_scale
    span = min(2 * int(np.ceil(reach)) + 1, in_size)
    one_over = _F32(1) / kernel_scale
    starts, weights = np.zeros(out_size, np.int64), np.zeros((out_size, span), np.float32)
    for x in range(out_size):
        sample = (_F32(x) + _F32(0.5)) * inv_scale + inv_translate
        if sample < 0 or sample > in_size:
            continue
        first = min(max(int(np.ceil(sample - reach - _F32(0.5))), 0), in_size - 1)
        last = min(max(int(np.floor(sample + reach - _F32(0.5))), 0), in_size - 1) + 1
        taps = [kernel(np.abs((_F32(s) + _F32(0.5) - sample) * one_over)) for s in range(first, last)]
        total = _F32(0)
        for w in taps:
            total = total + w
        if abs(total) >= _F32(1000) * np.finfo(np.float32).tiny:
            weights[x, :len(taps)] = [w * (_F32(1) / total) for w in taps]
        starts[x] = first
    return starts, weights


def _grad_spans(starts: np.ndarray, weights: np.ndarray, in_size: int) -> tuple[np.ndarray, np.ndarray]:
    """TensorFlow's ``ComputeGradSpansCore``: the spans transposed, per source index from its first output."""
    parts: list[list[tuple[int, np.float32]]] = [[] for _ in range(in_size)]
    for out, start in enumerate(starts):
        for j, w in enumerate(weights[out]):
            if w != 0 and start + j < in_size:
                parts[start + j].append((out, w))
    span = max((p[-1][0] - p[0][0] + 1 for p in parts if p), default=0)
    grad_starts, grad_weights = np.zeros(in_size, np.int64), np.zeros((in_size, span), np.float32)
    for k, p in enumerate(parts):
        if p:
            grad_starts[k] = p[0][0]
            for out, w in p:
                grad_weights[k, out - p[0][0]] += w
    return grad_starts, grad_weights


def _gather(x: Any, axis: int, starts: np.ndarray, weights: np.ndarray) -> Any:
    """TensorFlow's ``GatherRows``/``GatherColumns`` along ``axis``: each output the sum, in span order,
    of ``weight * source`` over the span's sources inside the input (zero weights too)."""
    size = x.shape[axis]
    x = jax.lax.optimization_barrier(x)  # (see _ops_color._unfolded)
    out: Any = None
    for j in range(weights.shape[1]):
        index = starts + j
        inside = index < size
        shape = [1] * x.ndim
        shape[axis] = len(starts)
        w = weights[:, j].reshape(shape)
        term = jnp.where(inside.reshape(shape), stored(w * jnp.take(x, np.minimum(index, size - 1), axis=axis)),
                         _F32(0))
        out = term if out is None else out + term
    return out if out is not None else jnp.zeros(x.shape[:axis] + (len(starts),) + x.shape[axis + 1:], _F32)


def _scale_and_translate(node: Node, image: Any, out_hw: tuple[int, int], scale: np.ndarray,
                         translation: np.ndarray) -> Any:
    kernel_type = node.attr("kernel_type", b"lanczos3")
    kernel_type = kernel_type.decode() if isinstance(kernel_type, bytes) else str(kernel_type)
    if kernel_type not in _KERNELS:
        invalid(node, f"Unrecognized kernel type: {kernel_type}")
    antialias = bool(node.attr("antialias", True))
    x = jnp.asarray(image)
    rows = _spans(kernel_type, out_hw[0], x.shape[1], float(scale[0]), float(translation[0]), antialias)
    cols = _spans(kernel_type, out_hw[1], x.shape[2], float(scale[1]), float(translation[1]), antialias)
    grad_rows, grad_cols = _grad_spans(*rows, x.shape[1]), _grad_spans(*cols, x.shape[2])

    @jax.custom_vjp
    def resize(x: Any) -> Any:
        return _gather(_gather(x.astype(_F32), 1, *rows), 2, *cols)

    def backward(_: Any, g: Any) -> tuple[Any]:  # (TensorFlow's ScaleAndTranslateGrad: the same order)
        return (_gather(_gather(g, 1, *grad_rows), 2, *grad_cols).astype(x.dtype),)

    resize.defvjp(lambda x: (resize(x), None), backward)
    return resize, backward


def _two(node: Node, v: Any, what: str) -> np.ndarray:
    value = np.asarray(static_value(node, v, what), np.float32)
    if value.shape != (2,):
        invalid(node, f"t must have two elements[{dims(value.shape)}]" if value.ndim == 1 else
                f"t must be 1-dimensional[{dims(value.shape)}]")
    return value


@_reg("ScaleAndTranslate")
def _scale_and_translate_op(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.resize`` with ``lanczos3``/``lanczos5``/``gaussian``/``mitchellcubic`` (or ``antialias``):
    the image (float32) sampled by ``kernel_type`` at ``(i + 0.5) / scale - translation / scale``, the
    kernel widened by ``1 / scale`` when ``antialias`` shrinks it; rows first, then columns, in
    TensorFlow's float32 weights and order of sums. Its gradient is ``ScaleAndTranslateGrad``'s."""
    images, size, scale, translation = args
    x = jnp.asarray(images)
    if x.ndim != 4:
        invalid(node, f"input must be 4-dimensional[{dims(x.shape)}]")
    out_hw = resize_size(node, size)
    scale, translation = _two(node, scale, "the scale"), _two(node, translation, "the translation")
    if not (scale > 0).all():
        invalid(node, "Scale must be greater than zero.")
    resize, _ = _scale_and_translate(node, x, out_hw, scale, translation)
    return [resize(x)]


@_reg("ScaleAndTranslateGrad")
def _scale_and_translate_grad(node: Node, args: list[Any]) -> list[Any]:
    """The image's gradient, at ``original_image``'s shape: the transposed spans, gathered as the forward."""
    grads, original, scale, translation = args
    scale, translation = _two(node, scale, "the scale"), _two(node, translation, "the translation")
    if not (scale > 0).all():
        invalid(node, "Scale must be greater than zero.")
    grads = jnp.asarray(grads)
    _, backward = _scale_and_translate(node, jnp.zeros(np.shape(original), result_dtype(original)),
                                       (grads.shape[1], grads.shape[2]), scale, translation)
    return [backward(None, grads.astype(_F32))[0]]
