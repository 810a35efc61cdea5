"""Images: resizes (``tf.image.resize``: bilinear, nearest-neighbor, bicubic) and crops
(``tf.image.crop_and_resize``) with their gradients, patches (``tf.image.extract_patches``),
non-max suppression of boxes (``CombinedNonMaxSuppression`` too: per class, then merged by score),
and morphological dilation (``tf.nn.dilation2d``, ``tf.nn.erosion2d``) with
its backprop ops: the largest sum of pixel and filter tap, whose gradient goes to the first largest tap
in the order of TensorFlow's loop (row-major).

A resize computes its source positions in float32 with the scale rule of TensorFlow's
``CalculateResizeScale`` and its (half-pixel) scalers, so the interpolation weights are TensorFlow's
bit for bit.

Each box's crop samples the image at ``crop_size`` points spread evenly from its top-left corner to
its bottom-right one (normalized coordinates; a crop of one point samples the box's centre), by
bilinear interpolation or the nearest pixel, in float32 as TensorFlow's kernel does; a point outside
the image is ``extrapolation_value``. As in TensorFlow, the boxes' gradient is the bilinear one for
either method, and a box index outside the batch fails with its ``OutOfRangeError`` (code 482, from
compiled code too). A bicubic resize takes TensorFlow's table of cubic weights (1,024 offsets between
pixels) and its order of sums.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._delivery import value_ops
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, learned_size, registrar, result_dtype, static_value
from ._ops_checks import dims, invalid, known_now

_reg = registrar(OPS)


def _positions(low: Any, high: Any, count: int, size: int) -> tuple[Any, Any]:
    """The sampling positions along one axis of ``size`` pixels (``(boxes, count)``, float32, each
    operation rounded as in TensorFlow's kernel) and whether each lies inside the image."""
    if count > 1:
        scale = _divide(_multiply(high - low, np.float32(size - 1)), count - 1)
        at = _multiply(low, np.float32(size - 1))[:, None] + _multiply(scale[:, None], jnp.arange(count, dtype=np.float32))
    else:
        at = _multiply(_multiply(low + high, np.float32(0.5)), np.float32(size - 1))[:, None]
    return at, (at >= 0) & (at <= size - 1)


# XLA's compilers fuse a product into the sum that reads it (one rounding, where TensorFlow's kernel
# rounds twice) and divide by a loop-invariant divisor through its reciprocal: positions 1 ulp off
# TensorFlow's put a point at the image's edge outside it (1,892 of 413,820 positions of boxes of tenths).
# Neither an optimization barrier nor a select stops the fusion; an integer the compiler cannot prove
# zero does, and a divisor that is an array in memory stops the reciprocal
# (tests/test_tf2_crop_and_resize.py enumerates the positions against NumPy's).
@jax.custom_jvp
def stored(x: Any) -> Any:
    """``x``, rounded to its dtype before any sum that reads it."""
    bits = jax.lax.bitcast_convert_type(x, jnp.int32)
    return jax.lax.bitcast_convert_type(bits + jnp.minimum(jnp.abs(bits | 1), 0), x.dtype)  # (|bits | 1| >= 1)


stored.defjvp(lambda primals, tangents: (stored(*primals), tangents[0]))


def _multiply(a: Any, b: Any) -> Any:
    """``a * b``, rounded as TensorFlow's kernel rounds it."""
    return stored(a * b)


def _divide(a: Any, divisor: int) -> Any:
    """``a / divisor``, correctly rounded."""
    array, a = jax.lax.optimization_barrier((jnp.full(jnp.shape(a), divisor, a.dtype), a))
    return a / array


def _crop(image: Any, boxes: Any, box_ind: Any, crop: tuple[int, int], method: str, fill: float) -> Any:
    """The crops, ``(boxes, crop_height, crop_width, depth)`` float32."""
    _, height, width, _ = image.shape
    boxes = boxes.astype(np.float32)
    y, y_in = _positions(boxes[:, 0], boxes[:, 2], crop[0], height)
    x, x_in = _positions(boxes[:, 1], boxes[:, 3], crop[1], width)
    b = box_ind[:, None, None]

    def pixels(rows: Any, cols: Any) -> Any:  # (boxes, crop_height, crop_width, depth)
        rows, cols = jnp.clip(rows, 0, height - 1).astype(np.int32), jnp.clip(cols, 0, width - 1).astype(np.int32)
        return image[b, rows[:, :, None], cols[:, None, :]].astype(np.float32)

    if method == "nearest":  # (roundf: halves away from zero; the positions kept are not negative)
        out = pixels(_round(y), _round(x))
    else:
        top, left, bottom, right = jnp.floor(y), jnp.floor(x), jnp.ceil(y), jnp.ceil(x)
        y_lerp, x_lerp = (y - top)[:, :, None, None], (x - left)[:, None, :, None]
        upper = pixels(top, left) + _multiply(pixels(top, right) - pixels(top, left), x_lerp)
        lower = pixels(bottom, left) + _multiply(pixels(bottom, right) - pixels(bottom, left), x_lerp)
        out = upper + _multiply(lower - upper, y_lerp)
    inside = (y_in[:, :, None] & x_in[:, None, :])[..., None]
    return jnp.where(inside, out, np.float32(fill))


def _round(v: Any) -> Any:
    whole = jnp.trunc(v)
    return whole + (v - whole >= 0.5)


def _checked_crop(node: Node, image: Any, boxes: Any, box_ind: Any, crop: tuple[int, int]) -> Any:
    """:func:`_crop` after TensorFlow's checks, with its derivatives: the image's of ``method``, the
    boxes' of bilinear interpolation (TensorFlow's approximation for ``nearest``)."""
    shape = np.shape(image)
    checks = ((len(shape) != 4, f"input image must be 4-D{dims(shape)}"),
              (len(shape) == 4 and 0 in shape[1:3], "image dimensions must be positive"),
              (np.ndim(boxes) != 2 or np.shape(boxes)[1] != 4, f"boxes must be 2-D [num_boxes, 4]{dims(np.shape(boxes))}"),
              (np.shape(box_ind) != np.shape(boxes)[:1], "box_index has incompatible shape"),
              (min(crop) <= 0, "crop dimensions must be positive"))
    for bad, text in checks:
        if bad:
            invalid(node, text)
    known = known_now(box_ind)
    ids = jnp.asarray(box_ind if known is None else known)
    outside = np.any((known < 0) | (known >= shape[0])) if known is not None else jnp.any((ids < 0) | (ids >= shape[0]))
    value_ops.report(node.name, outside, GraphError.BOX_INDEX_RANGE, extra={"op": node.op})
    image, boxes = jnp.asarray(image), jnp.asarray(boxes)
    method, fill = _method(node), float(node.attr("extrapolation_value", 0.0))
    if method == "bilinear":
        return _crop(image, boxes, ids, crop, method, fill)
    fixed = jax.lax.stop_gradient
    bilinear = _crop(fixed(image), boxes, ids, crop, "bilinear", fill)
    return _crop(image, fixed(boxes), ids, crop, method, fill) + (bilinear - fixed(bilinear))


def _method(node: Node) -> str:
    method = node.attr("method", "bilinear")
    return method.decode() if isinstance(method, bytes) else str(method)


def _crop_size(node: Node, size: Any) -> tuple[int, int]:
    height, width = (int(v) for v in np.reshape(static_value(node, size, "crop_size"), -1))
    return height, width


@_reg("CropAndResize")
def _crop_and_resize(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.crop_and_resize(image, boxes, box_indices, crop_size)``: ``(boxes, height, width, depth)``."""
    image, boxes, box_ind, size = args
    return [_checked_crop(node, image, boxes, box_ind, _crop_size(node, size))]


@_reg("CropAndResizeGradImage")
def _crop_and_resize_grad_image(node: Node, args: list[Any]) -> list[Any]:
    """The image's gradient (of shape ``image_size``, dtype ``T``): each crop point's gradient spread
    back over the pixels it sampled."""
    grads, boxes, box_ind, image_size = args
    shape = tuple(int(v) for v in np.reshape(static_value(node, image_size, "image_size"), -1))
    crop = tuple(np.shape(grads)[1:3])
    _, pullback = jax.vjp(lambda image: _checked_crop(node, image, boxes, box_ind, crop),
                          jnp.zeros(shape, np.float32))
    dtype = jax.dtypes.canonicalize_dtype(node.attr("T", np.dtype("float32")))
    return [pullback(jnp.asarray(grads, np.float32))[0].astype(dtype)]


@_reg("CropAndResizeGradBoxes")
def _crop_and_resize_grad_boxes(node: Node, args: list[Any]) -> list[Any]:
    """The boxes' gradient, ``(boxes, 4)`` float32: bilinear interpolation's (for either method)."""
    grads, image, boxes, box_ind = args
    crop = tuple(np.shape(grads)[1:3])
    _, pullback = jax.vjp(lambda b: _checked_crop(node, image, b, box_ind, crop), jnp.asarray(boxes, np.float32))
    return [pullback(jnp.asarray(grads, np.float32))[0]]


# -- bilinear and nearest-neighbor resizing ---------------------------------------------------
def resize_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TensorFlow's ``CalculateResizeScale``, in float32."""
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _bilinear_weights(in_size: int, out_size: int, node: Node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, lerp) per output position: TensorFlow's ``compute_interpolation_weights``."""
    scale = resize_scale(in_size, out_size, bool(node.attr("align_corners", False)))
    i = np.arange(out_size, dtype=np.float32)
    pos = (i + np.float32(0.5)) * scale - np.float32(0.5) if node.attr("half_pixel_centers", False) else i * scale
    floor = np.floor(pos)
    lower = np.maximum(floor, 0).astype(np.int64)
    upper = np.minimum(np.ceil(pos), in_size - 1).astype(np.int64)
    return lower, upper, (pos - floor).astype(np.float32)


def resize_size(node: Node, size: Any) -> tuple[int, int]:
    """A resize's ``[height, width]``, positive (TensorFlow's check; a gradient's text differs)."""
    height, width = (int(s) for s in static_value(node, size, "the size"))
    if height <= 0 or width <= 0:
        invalid(node, (
            "shape_t's elements must be positive" if node.op.endswith("Grad") else "output dimensions must be positive"))
    return height, width


def _bilinear(node: Node, images: Any, out_hw: tuple[int, int]) -> Any:
    """``images`` (``[batch, height, width, channels]``) resized to ``out_hw``, in float32."""
    x = jnp.asarray(images).astype(jnp.float32)
    y_lo, y_hi, y_lerp = _bilinear_weights(x.shape[1], out_hw[0], node)
    x_lo, x_hi, x_lerp = _bilinear_weights(x.shape[2], out_hw[1], node)
    top, bottom = x[:, y_lo], x[:, y_hi]
    x_lerp = x_lerp[:, None]
    # TensorFlow's order of operations: lerp along x in the top and bottom rows, then along y
    top = top[:, :, x_lo] + _multiply(top[:, :, x_hi] - top[:, :, x_lo], x_lerp)
    bottom = bottom[:, :, x_lo] + _multiply(bottom[:, :, x_hi] - bottom[:, :, x_lo], x_lerp)
    return top + _multiply(bottom - top, y_lerp[:, None, None])


def _nearest_index(in_size: int, out_size: int, node: Node) -> np.ndarray:
    """The source position per output position: TensorFlow's nearest-neighbor rule (round with
    ``align_corners``, floor otherwise; half-pixel centers without the -0.5)."""
    scale = resize_scale(in_size, out_size, bool(node.attr("align_corners", False)))
    i = np.arange(out_size, dtype=np.float32)
    half = bool(node.attr("half_pixel_centers", False))
    pos = (i + np.float32(0.5)) * scale if half else i * scale
    # roundf rounds halves away from zero; positions are not negative
    index = np.floor(pos + np.float32(0.5)) if node.attr("align_corners", False) else np.floor(pos)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if half else index


@_reg("ResizeNearestNeighbor")
def _resize_nearest(node: Node, args: list[Any]) -> list[Any]:
    images, size = args
    height, width = resize_size(node, size)
    x = jnp.asarray(images)
    return [x[:, _nearest_index(x.shape[1], height, node)][:, :, _nearest_index(x.shape[2], width, node)]]


@_reg("ResizeNearestNeighborGrad")
def _resize_nearest_grad(node: Node, args: list[Any]) -> list[Any]:
    """Each gradient entry added to the source pixel its output position copied."""
    grads, size = args
    height, width = resize_size(node, size)
    grads = jnp.asarray(grads)
    rows = _nearest_index(height, grads.shape[1], node)
    cols = _nearest_index(width, grads.shape[2], node)
    out = jnp.zeros((grads.shape[0], height, width, grads.shape[3]), grads.dtype)
    return [out.at[:, rows[:, None], cols[None, :]].add(grads)]


# -- bicubic resizing --------------------------------------------------------------------------
_TABLE_SIZE = 1024


def _cubic_table(a: float) -> np.ndarray:
    """TensorFlow's table of the cubic kernel's weights at ``1024 + 1`` offsets (``InitCoeffsTable``:
    computed in double, stored in float): ``[i, 0]`` at ``i / 1024``, ``[i, 1]`` at ``1 + i / 1024``."""
    x = (np.arange(_TABLE_SIZE + 1) * 1.0 / _TABLE_SIZE).astype(np.float32).astype(np.float64)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x = (x + 1.0).astype(np.float32).astype(np.float64)
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.stack([near, far], -1).astype(np.float32)


def _cubic_weights(in_size: int, out_size: int, node: Node) -> tuple[np.ndarray, np.ndarray]:
    """Per output position, the four source indices and their weights: TensorFlow's
    ``GetWeightsAndIndices`` (half-pixel centers: Keys' kernel, ``a = -0.5``, whose taps outside the
    image get no weight and the rest renormalized; else ``a = -0.75`` and the edge pixels repeated)."""
    half = bool(node.attr("half_pixel_centers", False))
    scale = resize_scale(in_size, out_size, bool(node.attr("align_corners", False)))
    i = np.arange(out_size, dtype=np.float32)
    at = (i + np.float32(0.5)) * scale - np.float32(0.5) if half else i * scale
    floor = np.floor(at).astype(np.int64)
    offset = np.rint((at - floor) * np.float32(_TABLE_SIZE)).astype(np.int64)  # (lrintf: halves to even)
    table = _cubic_table(-0.5 if half else -0.75)
    weights = np.stack([table[offset, 1], table[offset, 0], table[_TABLE_SIZE - offset, 0],
                        table[_TABLE_SIZE - offset, 1]], -1)
    taps = floor[:, None] + np.arange(-1, 3)
    index = np.clip(taps, 0, in_size - 1)
    if half:
        weights = np.where(index == taps, weights, np.float32(0))
        total = weights[:, 0] + weights[:, 1] + weights[:, 2] + weights[:, 3]
        usable = np.abs(total) >= np.float32(1000) * np.finfo(np.float32).tiny
        weights = np.where(usable[:, None], weights * (np.float32(1) / np.where(usable, total, 1))[:, None], weights)
    return index, weights.astype(np.float32)


def _bicubic(node: Node, images: Any, out_hw: tuple[int, int]) -> Any:
    """``images`` resized to ``out_hw`` in float32: four rows interpolated along y (TensorFlow's cached columns), then those along x."""
    x = jnp.asarray(images).astype(np.float32)
    rows, row_weights = _cubic_weights(x.shape[1], out_hw[0], node)
    cols, col_weights = _cubic_weights(x.shape[2], out_hw[1], node)

    def combine(values: list[Any], weights: np.ndarray, shape: tuple[int, ...]) -> Any:
        terms = [_multiply(v, weights[:, k].reshape(shape)) for k, v in enumerate(values)]
        return ((terms[0] + terms[1]) + terms[2]) + terms[3]

    along_y = combine([x[:, rows[:, k]] for k in range(4)], row_weights, (-1, 1, 1))
    return combine([along_y[:, :, cols[:, k]] for k in range(4)], col_weights, (-1, 1))


# -- the interpolating resizes and their gradients --------------------------------------------------
_INTERPOLATING = {"ResizeBilinear": _bilinear, "ResizeBicubic": _bicubic}


@_reg(*_INTERPOLATING)
def _resize(node: Node, args: list[Any]) -> list[Any]:
    images, size = args
    return [_INTERPOLATING[node.op](node, images, resize_size(node, size))]


@_reg(*(f"{op}Grad" for op in _INTERPOLATING))
def _resize_grad(node: Node, args: list[Any]) -> list[Any]:
    """The adjoint of the resize at ``original_image``'s shape, in its dtype."""
    grads, original = args
    resize = _INTERPOLATING[node.op.removesuffix("Grad")]
    grads = jnp.asarray(grads).astype(np.float32)
    _, pullback = jax.vjp(lambda x: resize(node, x, (grads.shape[1], grads.shape[2])),
                          jnp.zeros(np.shape(original), np.float32))
    return [pullback(grads)[0].astype(result_dtype(original))]


# -- patches -----------------------------------------------------------------------------------
@_reg("ExtractImagePatches")
def _extract_patches(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.extract_patches``: each output pixel holds the ``ksizes`` window (dilated by ``rates``)
    at its place, flattened row, column, depth; ``SAME`` pads as TensorFlow's convolutions do (the
    smaller half before), with zeros."""
    (x,) = args
    sizes, strides, rates = (list(node.attr(a)) for a in ("ksizes", "strides", "rates"))
    for name, v in (("ksizes", sizes), ("strides", strides), ("rates", rates)):
        if v[0] != 1 or v[3] != 1:
            GraphError.TF_UNIMPLEMENTED.raise_(node=node.name, op=node.op, error=f"Only support {name} across space.")
    padding = node.attr("padding", b"VALID")
    same = (padding.decode() if isinstance(padding, bytes) else str(padding)) == "SAME"
    x = jnp.asarray(x)
    indices, pads = [], []
    for size, k, s, r in zip(x.shape[1:3], sizes[1:3], strides[1:3], rates[1:3], strict=True):
        span = k + (k - 1) * (r - 1)
        count = -(-size // s) if same else max(-(-(size - span + 1) // s), 0)
        before = max((count - 1) * s + span - size, 0) // 2 if same else 0
        indices.append(np.arange(count)[:, None] * s + np.arange(k)[None, :] * r)  # (in the padded image)
        pads.append((before, max((count - 1) * s + span - size - before, 0) if count else 0))
    padded = jnp.pad(x, [(0, 0), *pads, (0, 0)])
    rows, cols = indices
    out = padded[:, rows[:, None, :, None], cols[None, :, None, :]]  # (batch, rows, cols, kr, kc, depth)
    return [out.reshape(*out.shape[:3], int(np.prod(out.shape[3:])))]


# -- non-max suppression -----------------------------------------------------------------------
def _overlaps(boxes: Any) -> Any:
    """Each pair's intersection over union, as TensorFlow's ``IOU`` computes it: corners in either
    order; 0 where a box has no area."""
    low = jnp.minimum(boxes[:, :2], boxes[:, 2:])
    high = jnp.maximum(boxes[:, :2], boxes[:, 2:])
    area = _multiply(high[:, 0] - low[:, 0], high[:, 1] - low[:, 1])
    top = jnp.maximum(low[:, None], low[None])
    bottom = jnp.minimum(high[:, None], high[None])
    inter = _multiply(jnp.maximum(bottom[..., 0] - top[..., 0], 0.0), jnp.maximum(bottom[..., 1] - top[..., 1], 0.0))
    union = (area[:, None] + area[None]) - inter
    empty = (area[:, None] <= 0) | (area[None] <= 0)
    return jnp.where(empty, 0.0, inter / jnp.where(empty, 1.0, union))



def _nms_checks(node: Node, checks: tuple[tuple[bool, str], ...], iou: Any) -> None:
    """TensorFlow's checks of a non-max suppression's inputs, in its order, then of a known threshold."""
    for bad, text in checks:
        if bad:
            invalid(node, text)
    known_iou = known_now(iou)
    if known_iou is not None and not 0 <= float(known_iou) <= 1:
        invalid(node, "iou_threshold must be in [0, 1]")

@_reg("NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
      "NonMaxSuppressionV5")
def _non_max_suppression(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.non_max_suppression`` (``_with_scores``, ``_padded``'s kernel): boxes by decreasing score
    (a tie: the lower index first), each kept unless its overlap with a box kept before exceeds
    ``iou_threshold``, at most ``max_output_size``, of scores above ``score_threshold``. The count is the
    data's (known eagerly, learned by ``jta.checked``) unless ``pad_to_max_output_size`` pads with zeros."""
    boxes, scores, size = args[:3]
    iou = float(node.attr("iou_threshold")) if node.op == "NonMaxSuppression" else args[3]
    threshold = args[4] if len(args) > 4 else -np.inf
    if node.op == "NonMaxSuppressionV5" and float(static_value(node, args[5], "soft_nms_sigma")) > 0:
        GraphError.UNSUPPORTED.raise_(items=f"  - node {node.name} ({node.op}): soft_nms_sigma > 0 (Soft-NMS)")
    size = int(static_value(node, size, "max_output_size"))
    checks = ((np.ndim(boxes) != 2 or np.shape(boxes)[1] != 4, f"boxes must be 2-D{dims(np.shape(boxes))}"),
              (np.shape(scores) != np.shape(boxes)[:1], "scores has incompatible shape"),
              (size < 0, "output size must be non-negative"))
    _nms_checks(node, checks, iou)
    boxes, scores = jnp.asarray(boxes, np.float32), jnp.asarray(scores)
    n = boxes.shape[0]
    order = jnp.argsort(-scores, stable=True)
    overlaps = _overlaps(boxes)[order][:, order]
    candidate = (scores > threshold)[order]

    def visit(k: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        kept, count = state
        keep = candidate[k] & (count < size) & ~jnp.any(kept & (overlaps[k] > iou))
        return kept.at[k].set(keep), count + keep

    kept, count = jax.lax.fori_loop(0, n, visit, (jnp.zeros(n, bool), jnp.zeros((), np.int32)))
    padded = node.op in ("NonMaxSuppressionV4", "NonMaxSuppressionV5") and bool(node.attr("pad_to_max_output_size"))
    known = known_now(count)
    rows = size if padded else int(known) if known is not None else learned_size(
        node, count, "the boxes (how many are kept is the result's length; jta.checked learns it at run time)",
        min(size, n))
    at = jnp.nonzero(kept, size=rows, fill_value=n)[0]
    indices = jnp.where(at < n, order[jnp.minimum(at, n - 1)], 0).astype(np.int32)
    if node.op == "NonMaxSuppressionV5":
        return [indices, jnp.where(at < n, scores[indices], 0).astype(scores.dtype), count]
    return [indices, count] if node.op == "NonMaxSuppressionV4" else [indices]


def _kept_per_class(overlaps: Any, candidate: Any, limit: int, iou: Any) -> Any:
    """Which boxes (in order of decreasing score) one class keeps: each candidate unless it overlaps one
    kept before by more than ``iou``, at most ``limit``."""
    n = candidate.shape[0]

    def visit(k: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        kept, count = state
        keep = candidate[k] & (count < limit) & ~jnp.any(kept & (overlaps[k] > iou))
        return kept.at[k].set(keep), count + keep

    return jax.lax.fori_loop(0, n, visit, (jnp.zeros(n, bool), jnp.zeros((), np.int32)))[0]


@_reg("CombinedNonMaxSuppression")
def _combined_non_max_suppression(node: Node, args: list[Any]) -> list[Any]:
    """``tf.image.combined_non_max_suppression``: per image and class, the non-max suppression of its boxes
    (``boxes[:, :, q]``, ``q`` the class or the one shared) of scores above ``score_threshold``, at most
    ``max_output_size_per_class``; per image, every class's kept boxes by decreasing score (the unused
    slots score -1, as TensorFlow's), the first ``max_total_size`` (with ``pad_per_class``: at most the
    classes' total), padded with zeros; boxes clipped to ``[0, 1]`` unless ``clip_boxes`` is false.
    Returns ``(boxes, scores, classes as float, valid detections)``. (Equal scores are taken in index
    order; TensorFlow's heap and ``std::sort`` leave their order unspecified.)"""
    boxes, scores, per_class, total, iou, threshold = args
    per_class = int(static_value(node, per_class, "max_output_size_per_class"))
    total = int(static_value(node, total, "max_total_size"))
    shape, score_shape = np.shape(boxes), np.shape(scores)
    checks = ((len(shape) != 4, f"boxes must be 4-D{dims(shape)}"),
              (len(score_shape) != 3, f"scores must be 3-D{dims(score_shape)}"),
              (len(shape) == 4 and shape[3] != 4, f"boxes must have 4 columns{dims(shape)}"),
              (per_class <= 0, "max_size_per_class must be positive"),
              (total <= 0, "max_total_size must be > 0"))
    _nms_checks(node, checks, iou)
    boxes, scores = jnp.asarray(boxes, np.float32), jnp.asarray(scores, np.float32)
    batch, n, q, _ = boxes.shape
    classes = scores.shape[2]
    limit = min(per_class, n)
    pad_per_class = bool(node.attr("pad_per_class", False))
    per_batch = min(total, per_class * classes) if pad_per_class else total
    iou, threshold = jnp.asarray(iou, np.float32), jnp.asarray(threshold, np.float32)

    def one_class(class_boxes: Any, class_scores: Any) -> tuple[Any, Any, Any]:
        order = jnp.argsort(-class_scores, stable=True)
        kept = _kept_per_class(_overlaps(class_boxes)[order][:, order], (class_scores > threshold)[order], limit, iou)
        at = jnp.nonzero(kept, size=limit, fill_value=n)[0]  # (the kept, in order of selection)
        found = at < n
        index = order[jnp.minimum(at, n - 1)]
        return (jnp.where(found, class_scores[index], -1.0), jnp.where(found[:, None], class_boxes[index], 0.0),
                found)

    def one_image(image_boxes: Any, image_scores: Any) -> tuple[Any, ...]:
        per_box = jnp.broadcast_to(image_boxes, (n, classes, 4)) if q == 1 else image_boxes
        cand_scores, cand_boxes, found = jax.vmap(one_class, in_axes=(1, 1))(per_box, image_scores)
        cand_classes = jnp.where(found, jnp.arange(classes, dtype=np.float32)[:, None], -1.0)
        cand_scores, cand_boxes, cand_classes = (cand_scores.reshape(-1), cand_boxes.reshape(-1, 4),
                                                 cand_classes.reshape(-1))
        valid = jnp.sum(found)
        detections = jnp.minimum(valid, per_batch)
        order = jnp.argsort(-cand_scores, stable=True)[:per_batch]
        slots = min(per_batch, order.shape[0])
        order = jnp.concatenate([order, jnp.zeros(per_batch - slots, order.dtype)])
        used = jnp.arange(per_batch) < detections
        out_boxes = cand_boxes[order]
        if bool(node.attr("clip_boxes", True)):
            out_boxes = jnp.maximum(jnp.minimum(out_boxes, 1.0), 0.0)
        return (jnp.where(used[:, None], out_boxes, 0.0), jnp.where(used, cand_scores[order], 0.0),
                jnp.where(used, cand_classes[order], 0.0), detections.astype(np.int32))

    return list(jax.vmap(one_image)(boxes, scores))


# -- morphological dilation ------------------------------------------------------------------------
def _dilation_taps(node: Node, shape: tuple[int, ...], filter_shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Per spatial axis, each output position's source index per filter tap (``(out, taps)``), whether
    it lies in the image, and the index TensorFlow's backprop uses where none does (the window's start,
    clamped): after TensorFlow's checks."""
    if len(shape) != 4:
        invalid(node, f"input must be 4-dimensional{dims(shape)}")
    if len(filter_shape) != 3:
        invalid(node, f"filter must be 3-dimensional: [{dims(filter_shape)}]")
    if shape[3] != filter_shape[2]:
        invalid(node, f"input and filter must have the same depth: {shape[3]} vs {filter_shape[2]}")
    strides, rates = list(node.attr("strides")), list(node.attr("rates"))
    for name, v in (("Stride", strides), ("Rate", rates)):
        if v[0] != 1 or v[3] != 1:
            GraphError.TF_UNIMPLEMENTED.raise_(node=node.name, op=node.op,
                                               error=f"{name} is only supported across spatial dimensions.")
    padding = node.attr("padding", b"VALID")
    same = (padding.decode() if isinstance(padding, bytes) else str(padding)) == "SAME"
    out = []
    for size, k, s, r in zip(shape[1:3], filter_shape[:2], strides[1:3], rates[1:3], strict=True):
        span = (k - 1) * r + 1
        count = -(-size // s) if same else max(-(-(size - span + 1) // s), 0)
        before = max((count - 1) * s + span - size, 0) // 2 if same else 0
        begin = np.arange(count) * s - before
        at = begin[:, None] + np.arange(k)[None, :] * r
        out += [np.clip(at, 0, size - 1), (at >= 0) & (at < size), np.clip(begin, 0, size - 1)]
    return tuple(out)


def _dilation(node: Node, x: Any, f: Any) -> Any:
    """``max`` over the filter's taps inside the image of ``x[tap] + filter[tap]``, TensorFlow's loop:
    the first largest tap in row-major order (``val > cur``: NaN never wins), ``lowest()`` with no tap,
    so the gradient goes to that tap's pixel and filter entry (with none: the window's first pixel, clamped,
    and the filter's first entry)."""
    x, f = jnp.asarray(x), jnp.asarray(f)
    rows, row_in, row_none, cols, col_in, col_none = _dilation_taps(node, x.shape, f.shape)
    kh, kw, depth = f.shape
    lowest = jnp.asarray(jnp.finfo(x.dtype).min if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min,
                         x.dtype)
    # (batch, out_rows, out_cols, taps, depth), taps row-major over the filter
    taps = x[:, rows[:, None, :, None], cols[None, :, None, :]] + f[None, None, None]
    taps = taps.reshape(*taps.shape[:3], kh * kw, depth)
    inside = (row_in[:, None, :, None] & col_in[None, :, None, :]).reshape(rows.shape[0], cols.shape[0], kh * kw, 1)
    usable = inside & (taps > lowest)  # (TensorFlow's strict comparison with its start, lowest())
    best = jnp.argmax(jnp.where(usable, taps, lowest), axis=3)  # (the first of equal ones)
    found = jnp.any(usable, axis=3)
    tap = jnp.where(found, best, 0)
    ty, tx = tap // kw, tap % kw
    py = jnp.where(found, jnp.asarray(rows)[jnp.arange(rows.shape[0])[:, None, None], ty], row_none[:, None, None])
    px = jnp.where(found, jnp.asarray(cols)[jnp.arange(cols.shape[0])[None, :, None], tx], col_none[None, :, None])
    b, d = jnp.arange(x.shape[0])[:, None, None, None], jnp.arange(depth)
    value = x[b, py, px, d] + f[ty, tx, d]
    return jnp.where(found, value, lowest + (value - jax.lax.stop_gradient(value)))


@_reg("Dilation2D")
def _dilation2d(node: Node, args: list[Any]) -> list[Any]:
    """``tf.nn.dilation2d`` (grayscale morphological dilation; ``tf.nn.erosion2d`` is its negation of the
    negated input and the flipped filter): ``[batch, out_rows, out_cols, depth]``."""
    x, f = args
    return [_dilation(node, x, f)]


@_reg("Dilation2DBackpropInput", "Dilation2DBackpropFilter")
def _dilation2d_backprop(node: Node, args: list[Any]) -> list[Any]:
    """The input's (the filter's) gradient: each output's gradient added at its chosen tap."""
    x, f, grads = (jnp.asarray(a) for a in args)
    out, pullback = jax.vjp(lambda x, f: _dilation(node, x, f), x, f)
    if out.shape != grads.shape:
        invalid(node, "out_backprop has incompatible size.")
    return [pullback(grads)[0 if node.op.endswith("Input") else 1]]
