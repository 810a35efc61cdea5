"""Projective transforms of images (``ImageProjectiveTransformV2``/``V3``): what Keras's ``RandomRotation``,
``RandomZoom``, ``RandomTranslation`` and ``tf.raw_ops.ImageProjectiveTransformV3`` run, computed as
TensorFlow's CPU kernel (``ProjectiveGenerator``, ``image_ops.h``) computes it.

Output pixel ``(y, x)`` of image ``b`` reads the input at ``((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)``,
``k = c0 x + c1 y + 1`` (the fill value where ``k`` is 0), in float32, each product rounded (the kernel's
order: XLA's CPU compiler would fuse a product into the sum that reads it, :func:`._ops_image.stored`
keeps them apart). ``fill_mode`` maps a position outside the image into it (``REFLECT``, ``WRAP``,
``NEAREST``: clamped after, as the kernel does) or leaves it (``CONSTANT``: the pixels outside read
``fill_value``); then ``NEAREST`` reads the pixel at the rounded position, ``BILINEAR`` weighs the four
around it, along ``x`` first.

The derivative is TensorFlow's registered gradient, not the transform's adjoint: the cotangent
transformed by the inverse matrices (``fill_value`` 0), and none for the transforms.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._nodes import Node
from ._ops import OPS, registrar, static_value
from ._ops_checks import invalid
from ._ops_image import stored

_reg = registrar(OPS)
_F32 = jnp.float32


def _mapped(coord: Any, size: int, mode: str) -> Any:
    """``MapCoordinate``: a position along an axis of ``size`` pixels, into the image by ``mode``."""
    if mode == "CONSTANT":
        return coord
    n = _F32(size)
    if mode == "NEAREST" or size <= 1:
        return jnp.clip(coord, 0, n - 1) if size > 1 else jnp.where(coord == coord, _F32(0), coord)
    if mode == "REFLECT":
        twice = _F32(2 * size)
        low = twice * jnp.trunc(-coord / twice) + coord  # (the kernel's int64 cast truncates toward zero)
        low = jnp.where(low < -n, low + twice, -low - 1)
        high = coord - twice * jnp.trunc(coord / twice)
        high = jnp.where(high >= n, twice - high - 1, high)
    else:  # WRAP
        span = _F32(size - 1)
        low = coord + n * (jnp.trunc(-coord / span) + 1)
        high = coord - n * jnp.trunc(coord / span)
    out = jnp.where(coord < 0, low, jnp.where(coord > n - 1, high, coord))
    return jnp.clip(out, 0, n - 1)


def _read(images: Any, b: Any, y: Any, x: Any, fill: Any) -> Any:
    """``read_with_fill_value``: the pixels at integer positions, ``fill`` outside the image."""
    _, h, w, _ = images.shape
    inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
    pixels = images[b, jnp.clip(y, 0, h - 1), jnp.clip(x, 0, w - 1)]
    return jnp.where(inside[..., None], pixels, fill)


def _transform(images: Any, transforms: Any, out_hw: tuple[int, int], fill: Any, interpolation: str,
               mode: str) -> Any:
    batch, h, w, _ = images.shape
    oy, ox = (jnp.asarray(v, _F32) for v in np.meshgrid(np.arange(out_hw[0]), np.arange(out_hw[1]), indexing="ij"))
    t = jnp.broadcast_to(transforms, (batch, 8))[:, :, None, None].astype(_F32)
    projection = stored(t[:, 6] * ox) + stored(t[:, 7] * oy) + _F32(1)
    safe = jnp.where(projection == 0, _F32(1), projection)
    in_x = _mapped((stored(t[:, 0] * ox) + stored(t[:, 1] * oy) + t[:, 2]) / safe, w, mode)
    in_y = _mapped((stored(t[:, 3] * ox) + stored(t[:, 4] * oy) + t[:, 5]) / safe, h, mode)
    b = jnp.arange(batch)[:, None, None]
    fill = jnp.asarray(fill, images.dtype)
    if interpolation == "NEAREST":
        # (std::round: halves away from zero; NaN positions read the fill value, as the kernel's cast does)
        def index(v: Any) -> Any:
            r = jnp.sign(v) * jnp.floor(jnp.abs(v) + _F32(0.5))
            return jnp.where(jnp.isfinite(r), r, -1).astype(jnp.int32)
        out = _read(images, b, index(in_y), index(in_x), fill)
    else:
        y0, x0 = jnp.floor(in_y), jnp.floor(in_x)
        y1, x1 = y0 + 1, x0 + 1

        def at(y: Any, x: Any) -> Any:
            yi, xi = (jnp.where(jnp.isfinite(v), v, -1).astype(jnp.int32) for v in (y, x))
            return _read(images, b, yi, xi, fill).astype(_F32)

        def lerp(wa: Any, a: Any, wb: Any, bb: Any) -> Any:
            return stored(wa[..., None] * a) + stored(wb[..., None] * bb)

        top = lerp(x1 - in_x, at(y0, x0), in_x - x0, at(y0, x1))
        bottom = lerp(x1 - in_x, at(y1, x0), in_x - x0, at(y1, x1))
        out = lerp(y1 - in_y, top, in_y - y0, bottom)
        out = out.astype(images.dtype) if jnp.issubdtype(images.dtype, jnp.floating) else \
            jnp.trunc(out).astype(images.dtype)
    return jnp.where((projection == 0)[..., None], fill, out)


def _inverse(transforms: Any) -> Any:
    """TensorFlow's gradient's transforms: the inverse matrices, flat, scaled to a last entry of 1."""
    m = jnp.concatenate([transforms, jnp.ones((transforms.shape[0], 1), transforms.dtype)], 1).reshape(-1, 3, 3)
    inv = jnp.linalg.inv(m).reshape(-1, 9)
    return inv[:, :8] / inv[:, 8:]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 4, 5))
def _projective(images: Any, transforms: Any, out_hw: tuple[int, int], fill: Any, interpolation: str,
                mode: str) -> Any:
    return _transform(images, transforms, out_hw, fill, interpolation, mode)


def _projective_fwd(images: Any, transforms: Any, out_hw: tuple[int, int], fill: Any, interpolation: str,
                    mode: str) -> tuple[Any, Any]:
    return _projective(images, transforms, out_hw, fill, interpolation, mode), (images.shape, transforms)


def _projective_bwd(out_hw: tuple[int, int], interpolation: str, mode: str, saved: Any, g: Any) -> tuple[Any, ...]:
    shape, transforms = saved
    inverse = _inverse(jnp.broadcast_to(transforms, (shape[0], 8)).astype(_F32))
    back = _transform(g, inverse, (shape[1], shape[2]), _F32(0), interpolation, mode)
    return back.astype(g.dtype), None, None


_projective.defvjp(_projective_fwd, _projective_bwd)


@_reg("ImageProjectiveTransformV2", "ImageProjectiveTransformV3")
def _image_projective_transform(node: Node, args: list[Any]) -> list[Any]:
    images, transforms, shape = jnp.asarray(args[0]), jnp.asarray(args[1]), args[2]
    fill = args[3] if len(args) > 3 else np.float32(0)
    if images.ndim != 4:
        invalid(node, f"Input images must have rank 4, got shape {list(images.shape)}")
    if transforms.ndim != 2 or transforms.shape[1] != 8 or transforms.shape[0] not in (1, images.shape[0]):
        invalid(node, "Input transform should be num_images x 8 or 1 x 8")
    out_hw = tuple(int(d) for d in static_value(node, shape, "output_shape"))
    if len(out_hw) != 2 or min(out_hw) <= 0:
        invalid(node, "output shape must be 2-dimensional and positive")
    interpolation = _text(node.attr("interpolation", "NEAREST"))
    mode = _text(node.attr("fill_mode", "CONSTANT"))
    return [_projective(images, transforms.astype(_F32), out_hw, jnp.asarray(fill, _F32), interpolation, mode)]


def _text(v: Any) -> str:
    return (v.decode() if isinstance(v, bytes) else str(v)).upper()
