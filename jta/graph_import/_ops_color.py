"""Image color ops: ``tf.image.rgb_to_hsv`` / ``hsv_to_rgb`` (``RGBToHSV``, ``HSVToRGB``) and
``tf.image.adjust_contrast``, ``adjust_saturation``, ``adjust_hue`` (``AdjustContrastv2``,
``AdjustSaturation``, ``AdjustHue``), computed as TensorFlow's CPU kernels compute them, bit for bit.

Each kernel's operations are followed in their order and rounding: the color space conversions are
Eigen expressions in the image's type; the adjustments compute in float32 per pixel (saturation and hue
through their own HSV helpers, which differ from ``RGBToHSV``: ``1 / (6 range)``, a hue offset added in
double), contrast subtracts a mean that TensorFlow sums by folding the image in halves. XLA's CPU
compiler would fuse a product into the sum that reads it, where the kernels round twice:
:func:`._ops_image.stored` rounds each such product first.

Derivatives: ``RGBToHSV``'s is TensorFlow's registered gradient (``_RGBToHSVGrad``, a piecewise formula
whose tie-breaking it follows); ``HSVToRGB`` is not differentiable in TensorFlow (its gradient is zero
here). TensorFlow registers no gradient for the adjustments: a gradient that reaches one raises
TensorFlow's ``LookupError`` (:mod:`._no_gradient`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._nodes import Node
from ._ops import OPS, registrar
from ._ops_checks import dims, failed_precondition, invalid
from ._ops_image import stored

_reg = registrar(OPS)
_F32 = np.float32


def _unfolded(x: Any) -> Any:
    """``x``, which XLA may not constant-fold into what reads it: folding :func:`._ops_image.stored`'s
    ``bitcast_convert`` of a constant whose layout a gather transposed gives the values transposed
    (seen on XLA's CPU compiler, jax 0.10: a constant cotangent through two gathers)."""
    return jax.lax.optimization_barrier(x)


def _channels(node: Node, images: Any, rank: int) -> Any:
    """``images`` after TensorFlow's checks: rank at least ``rank``, three channels (the adjustments)."""
    x = jnp.asarray(images)
    if x.ndim < rank:
        invalid(node, f"input must be at least 3-D, got shape[{dims(x.shape)}]" if rank == 3 else
                f"input must be at least 1D[{dims(x.shape)}]")
    if x.shape[-1] != 3 and rank == 1:  # (the conversions' class is FailedPreconditionError)
        failed_precondition(node, f"input must have 3 channels but input only has {x.shape[-1]} channels.")
    if x.shape[-1] != 3:
        invalid(node, f"input must have 3 channels but instead has {x.shape[-1]} channels.")
    return _unfolded(x)


def _scalar(node: Node, v: Any, what: str) -> Any:
    if np.ndim(v) != 0:
        invalid(node, f"{what} must be scalar: [{dims(np.shape(v))}]")
    return jnp.asarray(v, _F32)


# -- RGBToHSV and HSVToRGB (colorspace_op.h) ------------------------------------------------------
def _recip(x: Any) -> Any:
    """TensorFlow's ``_CustomReciprocal``: ``div_no_nan(1, x)``."""
    return jnp.where(x == 0, jnp.zeros_like(x), 1 / jnp.where(x == 0, jnp.ones_like(x), x))


def _rgb_to_hsv_values(x: Any) -> Any:
    """``colorspace_op.h``'s ``RGBToHSV``, in the image's type."""
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    one = np.ones((), x.dtype)
    v = jnp.maximum(jnp.maximum(r, g), b)
    rng = v - jnp.minimum(jnp.minimum(r, g), b)
    s = jnp.where(v > 0, rng / v, jnp.zeros_like(v))
    norm = stored((one / rng) * (one / np.asarray(6, x.dtype)))  # (range.inverse() * (T(1) / T(6)))
    third, two_thirds = np.asarray(2, x.dtype) / np.asarray(6, x.dtype), np.asarray(4, x.dtype) / np.asarray(6, x.dtype)
    h = jnp.where(r == v, stored(norm * (g - b)),
                  jnp.where(g == v, stored(norm * (b - r)) + third, stored(norm * (r - g)) + two_thirds))
    h = jnp.where(rng > 0, h, jnp.zeros_like(h))
    h = jnp.where(h < 0, h + one, h)
    return jnp.stack([h, s, v], -1)


@jax.custom_jvp
def _rgb_to_hsv(x: Any) -> Any:
    return _rgb_to_hsv_values(x)


@_rgb_to_hsv.defjvp
def _rgb_to_hsv_jvp(primals: tuple[Any], tangents: tuple[Any]) -> tuple[Any, Any]:
    """TensorFlow's ``_RGBToHSVGrad``, term for term: the partial derivatives of each case, ties broken
    as it does (the largest: red, then green, then blue; the smallest: blue, then green, then red), with
    its ``div_no_nan`` reciprocals (0 where a difference is 0) and its hue terms in degrees over 360."""
    (x,), (t,) = primals, tangents
    out = _rgb_to_hsv(x)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    s, v = out[..., 1], out[..., 2]

    def f(condition: Any) -> Any:  # (TensorFlow's masks are casts of comparisons)
        return condition.astype(x.dtype)

    r_big, g_big, b_big = f((r >= b) & (r >= g)), f((g > r) & (g >= b)), f((b > r) & (b > g))
    r_small, g_small, b_small = f((r < b) & (r < g)), f((g <= r) & (g < b)), f((b <= r) & (b <= g))
    r_pos, g_pos, b_pos = f(r > 0), f(g > 0), f(b > 0)
    ds_dr = r_pos * (r_big * (g_small * g + b_small * b) * _recip(jnp.square(r)) + r_small * -1 * _recip(g_big * g + b_big * b))
    ds_dg = g_pos * (g_big * (r_small * r + b_small * b) * _recip(jnp.square(g)) + g_small * -1 * _recip(r_big * r + b_big * b))
    ds_db = b_pos * (b_big * (g_small * g + r_small * r) * _recip(jnp.square(b)) + b_small * -1 * _recip(g_big * g + r_big * r))
    inv_s2, inv_v2 = _recip(jnp.square(s)), _recip(jnp.square(v))
    dh_dr = (60 * (r_pos * r_big * -1 * (g - b) * inv_s2 * inv_v2)
             + 60 * (g_pos * g_big * r_small * (b - g) * _recip(jnp.square(r - g)))
             + 60 * (g_pos * g_big * b_small * -1 * _recip(g - b))
             + 60 * (b_pos * b_big * r_small * (b - g) * _recip(jnp.square(b - r)))
             + 60 * (b_pos * b_big * g_small * _recip(b - g))) / 360
    dh_dg = (60 * (g_pos * g_big * -1 * (b - r) * inv_s2 * inv_v2)
             + 60 * (r_pos * r_big * g_small * (r - b) * _recip(jnp.square(r - g)))
             + 60 * (r_pos * r_big * b_small * _recip(r - b))
             + 60 * (b_pos * b_big * g_small * (r - b) * _recip(jnp.square(b - g)))
             + 60 * (b_pos * b_big * r_small * -1 * _recip(b - r))) / 360
    dh_db = (60 * (b_pos * b_big * -1 * (r - g) * inv_s2 * inv_v2)
             + 60 * (r_pos * r_big * b_small * (g - r) * _recip(jnp.square(r - b)))
             + 60 * (r_pos * r_big * g_small * -1 * _recip(r - g))
             + 60 * (g_pos * g_big * b_small * (g - r) * _recip(jnp.square(g - b)))
             + 60 * (g_pos * g_big * r_small * _recip(g - r))) / 360
    tr, tg, tb = t[..., 0], t[..., 1], t[..., 2]
    dh = dh_dr * tr + dh_dg * tg + dh_db * tb
    ds = ds_dr * tr + ds_dg * tg + ds_db * tb
    dv = r_big * tr + g_big * tg + b_big * tb
    return out, jnp.stack([dh, ds, dv], -1)


@_reg("RGBToHSV")
def _rgb_to_hsv_op(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.rgb_to_hsv``: hue in ``[0, 1)`` (0 for a gray pixel), saturation ``range / max`` (0 for
    black), value the largest channel."""
    return [_rgb_to_hsv(_channels(node, args[0], 1))]


@_reg("HSVToRGB")
def _hsv_to_rgb_op(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.hsv_to_rgb``: ``(1 - s + s * d) * v`` per channel, ``d`` the channel's clipped
    triangle of ``6 h``; not differentiable in TensorFlow (``ops.NotDifferentiable``)."""
    x = jax.lax.stop_gradient(_channels(node, args[0], 1))
    one, two, three, four = (np.asarray(k, x.dtype) for k in (1, 2, 3, 4))
    zero = np.zeros((), x.dtype)
    h, s, v = x[..., 0], x[..., 1], x[..., 2]
    dh = stored(h * np.asarray(6, x.dtype))
    d = [jnp.clip(jnp.abs(dh - three) - one, zero, one), jnp.clip(-jnp.abs(dh - two) + two, zero, one),
         jnp.clip(-jnp.abs(dh - four) + two, zero, one)]
    one_s = -s + one
    return [jnp.stack([(one_s + stored(s * dc)) * v for dc in d], -1)]


# -- AdjustContrastv2 (adjust_contrast_op.cc) --------------------------------------------------------
def _folded_sum(x: Any) -> Any:
    """The sum over axis 1 of ``(batch, pixels, channels)`` in TensorFlow's order: the pixels folded in
    halves (the upper half, ``left`` rows on, added onto the lower; an odd middle row kept) until one
    row is left."""
    remaining = x.shape[1]
    while remaining > 1:
        right = remaining // 2
        left = remaining - right
        folded = x[:, left:remaining] + x[:, :right]
        x = jnp.concatenate([folded, x[:, right:left]], axis=1)
        remaining = left
    return x[:, 0]


@_reg("AdjustContrastv2")
def _adjust_contrast(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.adjust_contrast``: ``mean + factor * (x - mean)`` per image and channel, in float32; the
    mean is the folded sum times ``1 / (height * width)``."""
    images, factor = args
    x = jnp.asarray(images)
    if x.ndim < 3:
        invalid(node, f"input must be at least 3-D, got shape[{dims(x.shape)}]")
    factor = _scalar(node, factor, "contrast_factor")
    if not x.size:
        return [x]
    x = _unfolded(x)
    height, width, channels = x.shape[-3:]
    flat = x.astype(_F32).reshape(-1, height * width, channels)
    mean = stored(_folded_sum(flat) * (_F32(1) / _F32(height * width)))[:, None]
    out = mean + stored(factor * (flat - mean))
    return [out.reshape(x.shape).astype(x.dtype)]


# -- AdjustSaturation (adjust_saturation_op.cc) ------------------------------------------------------
def _plus_double(p: Any, d: float) -> Any:
    """``(float)((double)p + d)`` of float32 ``p`` (the kernel's ``+ 2.0 / 6.0``), without float64: ``d``
    as two float32 parts, ``p + hi`` with its exact error (TwoSum), the rest added before the last rounding."""
    hi = _F32(d)
    lo = _F32(d - float(hi))
    total = p + hi
    back = stored(total - p)
    error = (p - (total - back)) + (hi - back)
    return total + (error + lo)


def _kernel_rgb_to_hsv(r: Any, g: Any, b: Any) -> tuple[Any, Any, Any]:
    """The saturation kernel's ``rgb_to_hsv`` (float32)."""
    v = jnp.maximum(r, jnp.maximum(g, b))
    rng = v - jnp.minimum(r, jnp.minimum(g, b))
    s = jnp.where(v > 0, rng / v, _F32(0))
    norm = _F32(1) / stored(_F32(6) * rng)
    h = jnp.where(r == v, stored(norm * (g - b)),
                  jnp.where(g == v, _plus_double(stored(norm * (b - r)), 2.0 / 6.0),
                            _plus_double(stored(norm * (r - g)), 4.0 / 6.0)))
    h = jnp.where(rng <= 0, _F32(0), h)
    return jnp.where(h < 0, h + _F32(1), h), s, v


def _kernel_hsv_to_rgb(h: Any, s: Any, v: Any) -> Any:
    """The saturation kernel's ``hsv_to_rgb``: six sectors of ``int(6 h)`` (any other: black plus ``m``)."""
    c = stored(s * v)
    m = v - c
    dh = stored(h * _F32(6))
    fmodu = jnp.where(dh <= 0, dh + _F32(2), dh)  # (its loops, for hues in [0, 1])
    for _ in range(3):
        fmodu = jnp.where(fmodu >= 2, fmodu - _F32(2), fmodu)
    x = stored(c * (_F32(1) - jnp.abs(fmodu - _F32(1))))
    zero = jnp.zeros_like(c)
    sector = jnp.trunc(dh)
    table = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c), (c, zero, x)]
    out = [zero, zero, zero]
    for k, channels in enumerate(table):
        out = [jnp.where(sector == k, channel, o) for channel, o in zip(channels, out, strict=True)]
    return jnp.stack([o + m for o in out], -1)


@_reg("AdjustSaturation")
def _adjust_saturation(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.adjust_saturation``: each pixel's saturation times ``scale``, clipped to ``[0, 1]``."""
    images, scale = args
    x = _channels(node, images, 3)
    scale = _scalar(node, scale, "scale")
    f = x.astype(_F32)
    h, s, v = _kernel_rgb_to_hsv(f[..., 0], f[..., 1], f[..., 2])
    s = jnp.minimum(_F32(1), jnp.maximum(_F32(0), s * scale))
    return [_kernel_hsv_to_rgb(h, s, v).astype(x.dtype)]


# -- AdjustHue (adjust_hue_op.cc) ------------------------------------------------------------------
def _wrapped(h: Any) -> Any:
    """The kernel's ``while (h < 0) h += 6; while (h >= 6) h -= 6;`` (a loop: ``delta`` is not bounded)."""
    def step(h: Any) -> Any:
        return jnp.where(h < 0, h + _F32(6), jnp.where(h >= 6, h - _F32(6), h))
    return jax.lax.while_loop(lambda h: jnp.any((h < 0) | (h >= 6)), step, h)


@_reg("AdjustHue")
def _adjust_hue(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.adjust_hue``: each pixel's hue turned by ``delta`` (of a full turn), keeping its largest
    and smallest channels; the kernel's hue is in sectors ``[0, 6)``, the middle channel interpolated."""
    images, delta = args
    x = _channels(node, images, 3)
    delta = _scalar(node, delta, "delta")
    f = x.astype(_F32)
    r, g, b = f[..., 0], f[..., 1], f[..., 2]
    # (sector, max, mid, min) by the kernel's comparisons; ties fall as its branches do
    r_lt_g = r < g
    cases = [(r_lt_g & (b < r), 1, g, r, b), (r_lt_g & ~(b < r) & (b > g), 3, b, g, r),
             (r_lt_g & ~(b < r) & ~(b > g), 2, g, b, r), (~r_lt_g & (b < g), 0, r, g, b),
             (~r_lt_g & ~(b < g) & (b > r), 4, b, r, g)]
    sector, high, mid, low = jnp.full(r.shape, _F32(5)), r, b, g  # (the last branch: g <= b <= r)
    for where, k, hi, md, lo in cases:
        sector, high, mid, low = (jnp.where(where, _F32(k), sector), jnp.where(where, hi, high),
                                  jnp.where(where, md, mid), jnp.where(where, lo, low))
    flat = high == low
    ratio = (mid - low) / jnp.where(flat, _F32(1), high - low)
    even = jnp.mod(sector, 2) == 0
    h = jnp.where(flat, _F32(0), sector + jnp.where(even, ratio, _F32(1) - ratio))
    h = _wrapped(h + stored(delta * _F32(6)))
    sector = jnp.trunc(h)
    ratio = h - sector
    ratio = jnp.where(jnp.mod(sector, 2) == 0, ratio, _F32(1) - ratio)
    mid = low + stored(ratio * (high - low))
    table = [(high, mid, low), (mid, high, low), (low, high, mid), (low, mid, high), (mid, low, high)]
    out = [high, low, mid]  # (sector 5, and any other)
    for k, channels in enumerate(table):
        out = [jnp.where(sector == k, channel, o) for channel, o in zip(channels, out, strict=True)]
    return [jnp.stack(out, -1).astype(x.dtype)]

