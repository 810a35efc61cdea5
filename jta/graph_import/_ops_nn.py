"""The neural-network ops of an imported graph: convolutions, pooling, batch norm, LRN, softmax and
cross entropy, activations.

Registered into :data:`jta.graph_import._ops.OPS` (importing this module files them). Each op
computes what TensorFlow's CPU kernel computes, gradient ops included: a backprop op is the
``jax.vjp`` of the forward op at the shape it is given (the transposed convolution, the filter
gradient, the spread of an average), so it is exactly the adjoint TF's kernel computes.

Layouts follow the node's ``data_format`` (``NHWC``/``NCHW``, ``NDHWC``/``NCDHW``) and padding its
``padding`` (``SAME`` with TF's split, more after than before; ``VALID``; ``EXPLICIT`` with
``explicit_paddings``). A max pool's gradient goes to the first maximum of each window.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _derivatives, _ops_checks
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, as_numpy, registrar, simple, static_value, xp_of

_reg = registrar(OPS)
_HIGHEST = jax.lax.Precision.HIGHEST  # TF's CPU kernels compute in full float32


# -- layouts and padding ----------------------------------------------------------------------
def _channels_first(node: Node) -> bool:
    fmt = str(node.attr("data_format", "NHWC"))
    if fmt not in ("NHWC", "NCHW", "NDHWC", "NCDHW"):
        GraphError.UNSUPPORTED.raise_(items=f"  - data_format {fmt} of node {node.name} ({node.op})")
    return fmt.startswith("NC")


def _spatial(node: Node, ndim: int) -> list[int]:
    """The spatial axes of a rank-``ndim`` tensor in the node's layout."""
    return list(range(2, ndim)) if _channels_first(node) else list(range(1, ndim - 1))


def _pads(node: Node, sizes: Sequence[int], window: Sequence[int], strides: Sequence[int],
          dilations: Sequence[int], axes: Sequence[int]) -> list[tuple[int, int]]:
    """The (before, after) padding of each axis in ``axes`` (indices into the full-rank attribute
    lists, such as ``explicit_paddings``), as TF pads: ``SAME`` keeps ``ceil(size / stride)``
    outputs and puts the odd element after."""
    padding = str(node.attr("padding"))
    if padding == "VALID":
        return [(0, 0)] * len(sizes)
    if padding == "EXPLICIT":
        explicit = list(node.attr("explicit_paddings", []))
        return [(int(explicit[2 * a]), int(explicit[2 * a + 1])) for a in axes]
    if padding != "SAME":
        GraphError.UNSUPPORTED.raise_(items=f"  - padding {padding} of node {node.name} ({node.op})")
    pads = []
    for n, k, s, d in zip(sizes, window, strides, dilations, strict=True):
        total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def _ints(node: Node, key: str, default: Sequence[int]) -> list[int]:
    return [int(v) for v in (node.attr(key) or default)]


# -- convolutions -----------------------------------------------------------------------------
# Each kernel is jitted with its hashable parameters static: eagerly, an op is one compiled call
# (not one per primitive, which made a pooling gradient cost seconds); under jit it inlines.
@dataclasses.dataclass(frozen=True)
class _Conv:
    """A convolution's parameters; ``depthwise``: the filter is ``[..., in, multiplier]`` and output
    channel ``c * multiplier + m`` reads input channel ``c`` only."""

    strides: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    dilations: tuple[int, ...]
    layout: str  # "NHWC", "NCHW", "NDHWC", "NCDHW"
    groups: int
    depthwise: bool

    def __call__(self, x: Any, w: Any) -> Any:
        if self.depthwise:
            w = w.reshape((*w.shape[:-2], 1, w.shape[-2] * w.shape[-1]))
        spatial = self.layout.replace("N", "").replace("C", "")
        return jax.lax.conv_general_dilated(
            x, w, self.strides, self.pads, rhs_dilation=self.dilations,
            dimension_numbers=(self.layout, spatial + "IO", self.layout), feature_group_count=self.groups,
            precision=_HIGHEST)


def _conv_params(node: Node, x_shape: Sequence[int], w_shape: Sequence[int]) -> _Conv:
    """``Conv2D``/``Conv3D`` (grouped when the filter has fewer input channels than the input) or,
    for the ``Depthwise`` ops, ``DepthwiseConv2dNative``, on an input of ``x_shape``."""
    ndim = len(x_shape)
    axes = _spatial(node, ndim)
    letters = "DHW"[5 - ndim:]
    channels = x_shape[1 if _channels_first(node) else -1]
    depthwise = node.op.startswith("Depthwise")
    strides = [_ints(node, "strides", [1] * ndim)[a] for a in axes]
    dilations = [_ints(node, "dilations", [1] * ndim)[a] for a in axes]
    pads = _pads(node, [x_shape[a] for a in axes], w_shape[:-2], strides, dilations, axes)
    return _Conv(tuple(strides), tuple(pads), tuple(dilations),
                 "NC" + letters if _channels_first(node) else "N" + letters + "C",
                 channels if depthwise else channels // w_shape[-2], depthwise)


@functools.partial(jax.jit, static_argnums=0)
def _conv(p: _Conv, x: Any, w: Any) -> Any:
    return p(x, w)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _conv_input_grad(p: _Conv, shape: tuple[int, ...], w: Any, dy: Any) -> Any:
    return jax.vjp(lambda x: p(x, w), jnp.zeros(shape, dy.dtype))[1](dy)[0]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _conv_filter_grad(p: _Conv, shape: tuple[int, ...], x: Any, dy: Any) -> Any:
    return jax.vjp(lambda w: p(x, w), jnp.zeros(shape, dy.dtype))[1](dy)[0]


def _shape_arg(node: Node, v: Any, what: str) -> tuple[int, ...]:
    return _ops_checks.dimensions(node, static_value(node, v, what))


def _depths(node: Node, x_shape: Sequence[int], w_shape: Sequence[int]) -> None:
    """A 2-D convolution gradient's depths, as TensorFlow's kernels check them (``ComputeConv2DDimension``):
    the input's a multiple of the filter's, the output's a multiple of the groups that makes."""
    if node.op not in ("Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropInput"):
        return
    depth, patch, out = x_shape[1 if _channels_first(node) else -1], w_shape[-2], w_shape[-1]
    if patch > 0 and depth % patch:
        _ops_checks.invalid(node, (
            f"input depth must be evenly divisible by filter depth: {depth} vs {patch}"))
    groups = depth // patch if patch > 0 else 0
    if groups and (out % groups or out < groups):
        _ops_checks.invalid(node, (
            f"output depth must be evenly divisible by number of groups: {out} vs {groups}"))


@_reg("Conv2D", "Conv3D", "DepthwiseConv2dNative")
def _conv_op(node: Node, args: list[Any]) -> list[Any]:
    x, w = (jnp.asarray(a) for a in args)
    return [_conv(_conv_params(node, x.shape, w.shape), x, w)]


@_reg("Conv2DBackpropInput", "Conv3DBackpropInputV2", "DepthwiseConv2dNativeBackpropInput")
def _conv_backprop_input(node: Node, args: list[Any]) -> list[Any]:
    """``(input_sizes, filter, out_backprop)``: the adjoint of the convolution in its input."""
    shape = _shape_arg(node, args[0], "input_sizes")
    w, dy = jnp.asarray(args[1]), jnp.asarray(args[2])
    if len(shape) == dy.ndim - 2:  # the spatial sizes only: the batch from dy, the channels from the filter
        shape = (dy.shape[0], w.shape[-2], *shape) if _channels_first(node) else (dy.shape[0], *shape, w.shape[-2])
    _depths(node, shape, w.shape)
    return [_conv_input_grad(_conv_params(node, shape, w.shape), shape, w, dy)]


@_reg("Conv2DBackpropFilter", "Conv3DBackpropFilterV2", "DepthwiseConv2dNativeBackpropFilter")
def _conv_backprop_filter(node: Node, args: list[Any]) -> list[Any]:
    """``(input, filter_sizes, out_backprop)``: the adjoint of the convolution in its filter."""
    shape = _shape_arg(node, args[1], "filter_sizes")
    x, dy = jnp.asarray(args[0]), jnp.asarray(args[2])
    _depths(node, x.shape, shape)
    return [_conv_filter_grad(_conv_params(node, x.shape, shape), shape, x, dy)]


# -- pooling ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Pool:
    """A pooling window over every axis (in the node's layout) and the padding of each axis."""

    ksize: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]


def _pool_params(node: Node, args: list[Any], shape: Sequence[int]) -> _Pool:
    """``ksize`` and ``strides`` are attributes, or the last two inputs of the ``V2`` ops."""
    ndim = len(shape)
    if node.op.endswith("V2"):
        ksize = [int(v) for v in static_value(node, args[-2], "ksize")]
        strides = [int(v) for v in static_value(node, args[-1], "strides")]
    else:
        ksize, strides = _ints(node, "ksize", [1] * ndim), _ints(node, "strides", [1] * ndim)
    if ksize[0] != 1 or strides[0] != 1:  # (TensorFlow's kernels' checks, in their order)
        GraphError.POOL_BATCH.raise_(name=node.name, op=node.op)
    if node.op in ("MaxPoolGrad", "MaxPoolGradV2", "MaxPoolGradGrad", "MaxPoolGradGradV2"):
        _forward_shape(node, shape, ksize, strides, np.shape(args[1]))
    if min(ksize) <= 0:
        _ops_checks.invalid(node, "Sliding window ksize must be positive.")
    if min(strides) <= 0:
        _ops_checks.invalid(node, f"Stride must be > 0, but got {min(strides)}")
    pads = _pads(node, shape, ksize, strides, [1] * ndim, range(ndim))
    return _Pool(tuple(ksize), tuple(strides), tuple(pads))


def _forward_shape(node: Node, shape: Sequence[int], ksize: list[int], strides: list[int], got: Sequence[int]) -> None:
    """A max pool gradient's ``orig_output``: the shape the pool of ``orig_input`` has (TensorFlow's kernel
    checks it before the window's size)."""
    pads = _pads(node, shape, ksize, strides, [1] * len(shape), range(len(shape)))
    expected = tuple((n + b + a - k) // s + 1 for n, k, s, (b, a) in zip(shape, ksize, strides, pads, strict=True))
    if min(expected) >= 0 and expected != tuple(got):
        _ops_checks.invalid(node, (
            f"Expected orig_output shape to be [{_ops_checks.dims(expected)}], but got [{_ops_checks.dims(got)}]"))


def _lowest(dtype: Any) -> np.ndarray:
    """The init of a max, a numpy constant (JAX differentiates a window reduction with a known monoid)."""
    return np.asarray(-np.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min, dtype)


@functools.partial(jax.jit, static_argnums=0)
def _max_pool(p: _Pool, x: Any) -> Any:
    return jax.lax.reduce_window(x, _lowest(x.dtype), jax.lax.max, p.ksize, p.strides, p.pads)


def _window_counts(shape: Sequence[int], p: _Pool) -> np.ndarray:
    """How many elements of the unpadded input each window holds (the divisor of ``AvgPool``)."""
    counts = np.ones((), np.int64)
    for n, k, s, (before, after) in zip(shape, p.ksize, p.strides, p.pads, strict=True):
        start = np.arange((n + before + after - k) // s + 1) * s - before
        counts = np.multiply.outer(counts, np.minimum(start + k, n) - np.maximum(start, 0))
    return counts


@functools.partial(jax.jit, static_argnums=0)
def _avg_pool(p: _Pool, x: Any) -> Any:
    total = jax.lax.reduce_window(x, np.zeros((), x.dtype), jax.lax.add, p.ksize, p.strides, p.pads)
    return total / _window_counts(x.shape, p).astype(x.dtype)


def _first_maxima(p: _Pool, x: Any) -> Iterator[tuple[tuple[int, ...], list[int], Any]]:
    """For each position in the window (row-major): its offset, the end of its strided slice of the
    padded input, and where that position holds the window's first maximum (boolean, the output's
    shape). TF's CPU kernels (``MaxPoolGrad``, ``MaxPoolWithArgmax``, oneDNN's ``MaxPool3DGrad``,
    TF's default on x86) route to the first maximum; TF's own ``MaxPool3DGrad`` kernel
    (``TF_ENABLE_ONEDNN_OPTS=0``) to every maximum instead."""
    padded = jnp.pad(x, p.pads, constant_values=_lowest(x.dtype))
    valid = np.pad(np.ones(x.shape, bool), p.pads)  # padding is never a maximum
    y = jax.lax.reduce_window(padded, _lowest(x.dtype), jax.lax.max, p.ksize, p.strides, "VALID")
    taken = np.zeros(y.shape, bool)
    for offset in itertools.product(*(range(k) for k in p.ksize)):
        limit = [o + (n - 1) * s + 1 for o, n, s in zip(offset, y.shape, p.strides, strict=True)]
        window = tuple(slice(o, m, s) for o, m, s in zip(offset, limit, p.strides, strict=True))
        hit = (jax.lax.slice(padded, offset, limit, p.strides) == y) & valid[window] & ~taken
        taken = taken | hit
        yield offset, limit, hit


@functools.partial(jax.jit, static_argnums=0)
def _max_pool_grad(p: _Pool, x: Any, dy: Any) -> Any:
    """The gradient of a max pool: each window's ``dy`` goes to its first maximum, put back with an
    interior pad at each position of the window."""
    shape = [n + b + a for n, (b, a) in zip(x.shape, p.pads, strict=True)]
    grad = jnp.zeros(shape, dy.dtype)
    zero = np.zeros((), dy.dtype)
    for offset, limit, hit in _first_maxima(p, x):
        config = [(o, n - m, s - 1) for o, m, s, n in zip(offset, limit, p.strides, shape, strict=True)]
        grad = grad + jax.lax.pad(jnp.where(hit, dy, zero), zero, config)
    return grad[tuple(slice(b, b + n) for (b, _), n in zip(p.pads, x.shape, strict=True))]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _argmax(p: _Pool, include_batch: bool, x: Any) -> Any:
    """``MaxPoolWithArgmax``'s indices (NHWC): the flat index ``((b * height + h) * width + w) * channels
    + c`` of each window's first maximum, without the ``b`` term unless ``include_batch``."""
    n, height, width, channels = x.shape
    out = jnp.zeros(jax.eval_shape(lambda v: _max_pool(p, v), x).shape, jnp.int32)
    for offset, _, hit in _first_maxima(p, x):
        coords = np.meshgrid(*(np.arange(k) * s + o - b for k, s, o, (b, _) in
                               zip(out.shape, p.strides, offset, p.pads, strict=True)), indexing="ij")
        flat = ((coords[0] * height * include_batch + coords[1]) * width + coords[2]) * channels + coords[3]
        out = jnp.where(hit, flat.astype(np.int32), out)
    return out


@functools.partial(jax.jit, static_argnums=(0, 1))
def _scatter_argmax(include_batch: bool, shape: tuple[int, ...], grad: Any, argmax: Any) -> Any:
    """``grad`` added at the flat indices ``argmax`` of an input of ``shape`` (its batch added back
    when the indices leave it out)."""
    index = argmax.reshape(shape[0], -1).astype(jnp.int32)
    if not include_batch:
        index = index + np.arange(shape[0])[:, None] * int(np.prod(shape[1:]))
    flat = jnp.zeros(int(np.prod(shape)), grad.dtype).at[index.reshape(-1)].add(grad.reshape(-1))
    return flat.reshape(shape)


@functools.partial(jax.jit, static_argnums=0)
def _max_pool_grad_grad(p: _Pool, x: Any, y: Any, ggrad: Any) -> Any:
    return jax.vjp(lambda dy: _max_pool_grad(p, x, dy), jnp.zeros(y.shape, ggrad.dtype))[1](ggrad)[0]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _avg_pool_grad(p: _Pool, shape: tuple[int, ...], dy: Any) -> Any:
    return jax.vjp(lambda x: _avg_pool(p, x), jnp.zeros(shape, dy.dtype))[1](dy)[0]


@_reg("MaxPool", "MaxPoolV2", "MaxPool3D")
def _max_pool_op(node: Node, args: list[Any]) -> list[Any]:
    x = jnp.asarray(args[0])
    return [_max_pool(_pool_params(node, args, x.shape), x)]


@_reg("AvgPool", "AvgPool3D")
def _avg_pool_op(node: Node, args: list[Any]) -> list[Any]:
    x = jnp.asarray(args[0])
    return [_avg_pool(_pool_params(node, args, x.shape), x)]


@_reg("MaxPoolGrad", "MaxPoolGradV2", "MaxPool3DGrad")
def _max_pool_grad_op(node: Node, args: list[Any]) -> list[Any]:
    """``(orig_input, orig_output, grad)``; like TF's kernels, the maxima are those of ``orig_input``."""
    x, dy = jnp.asarray(args[0]), jnp.asarray(args[2])
    return [_max_pool_grad(_pool_params(node, args, x.shape), x, dy)]


@_reg("MaxPoolGradGrad", "MaxPoolGradGradV2", "MaxPool3DGradGrad")
def _max_pool_grad_grad_op(node: Node, args: list[Any]) -> list[Any]:
    """``(orig_input, orig_output, grad)``: the gradient of ``MaxPoolGrad`` in its ``grad``, each
    window reading ``grad`` at its first maximum."""
    x, y, ggrad = (jnp.asarray(a) for a in args[:3])
    return [_max_pool_grad_grad(_pool_params(node, args, x.shape), x, y, ggrad)]


@_reg("AvgPoolGrad", "AvgPool3DGrad")
def _avg_pool_grad_op(node: Node, args: list[Any]) -> list[Any]:
    """``(orig_input_shape, grad)``: each window's ``grad`` spread evenly over its unpadded elements."""
    shape = tuple(int(v) for v in static_value(node, args[0], "orig_input_shape"))
    for d in (d for d in shape if d < 0):  # (TensorFlow's TensorShape::AddDimWithStatus)
        _ops_checks.invalid(node, f"Expected a non-negative size, got {d}")
    return [_avg_pool_grad(_pool_params(node, args, shape), shape, jnp.asarray(args[1]))]


@_reg("MaxPoolWithArgmax")
def _max_pool_with_argmax(node: Node, args: list[Any]) -> list[Any]:
    x = jnp.asarray(args[0])
    p = _pool_params(node, args, x.shape)
    index = _argmax(p, bool(node.attr("include_batch_in_index", False)), x)
    return [_max_pool(p, x), index.astype(jax.dtypes.canonicalize_dtype(node.attr("Targmax", np.dtype(np.int64))))]


@_reg("MaxPoolGradWithArgmax")
def _max_pool_grad_with_argmax(node: Node, args: list[Any]) -> list[Any]:
    """``(input, grad, argmax)``: ``grad`` added where ``argmax`` points."""
    x, grad, argmax = (jnp.asarray(a) for a in args)
    return [_scatter_argmax(bool(node.attr("include_batch_in_index", False)), x.shape, grad, argmax)]


# -- batch norm -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Norm:
    axis: int  # the channel axis
    epsilon: float
    training: bool
    factor: float  # exponential_avg_factor
    v3: bool


def _norm_params(node: Node, ndim: int) -> _Norm:
    return _Norm(1 if _channels_first(node) else ndim - 1, float(node.attr("epsilon", 1e-4)),
                 bool(node.attr("is_training", True)), float(node.attr("exponential_avg_factor", 1.0)),
                 node.op.endswith("V3"))


def _batch_axes(p: _Norm, x: Any) -> tuple[tuple[int, ...], list[int], int]:
    """The reduced axes, the shape a per-channel vector broadcasts with, and the count per channel."""
    shape = [1] * x.ndim
    shape[p.axis] = -1
    return tuple(a for a in range(x.ndim) if a != p.axis), shape, x.size // max(x.shape[p.axis], 1)


@functools.partial(jax.jit, static_argnums=0)
def _batch_norm(p: _Norm, x: Any, scale: Any, offset: Any, mean: Any, variance: Any) -> list[Any]:
    reduce, shape, n = _batch_axes(p, x)
    xu = x.astype(scale.dtype)  # half-precision x: statistics in scale's float32
    if p.training:
        m = jnp.mean(xu, axis=reduce)
        v = jnp.mean(jnp.square(xu - m.reshape(shape)), axis=reduce)
        unbiased = v * np.asarray(n / max(n - 1, 1), v.dtype)
        if p.factor == 1.0:  # the running mean and variance may be empty then
            outs = [m, unbiased]
        else:
            outs = [(1 - p.factor) * mean + p.factor * m, (1 - p.factor) * variance + p.factor * unbiased]
    else:
        m, v = mean, variance
        outs = [mean, variance]
    y = (xu - m.reshape(shape)) * (jax.lax.rsqrt(v + p.epsilon) * scale).reshape(shape) + offset.reshape(shape)
    outs = [y.astype(x.dtype), *outs, m, v]
    return outs + [jnp.zeros((0,), scale.dtype)] if p.v3 else outs


@_reg("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _fused_batch_norm(node: Node, args: list[Any]) -> list[Any]:
    """``(x, scale, offset, mean, variance) -> (y, batch_mean, batch_variance, reserve_space_1,
    reserve_space_2[, reserve_space_3])`` as TF's CPU kernel: in training the batch statistics
    normalize (biased variance, also saved in the reserve spaces), ``batch_variance`` is the
    unbiased one, blended with the running values when ``exponential_avg_factor`` is not 1;
    in inference the given mean and variance normalize and pass through. Differentiated as TensorFlow's
    registered gradient does: through ``y`` alone, to ``x``, ``scale`` and ``offset`` (the statistics
    given and returned get none: TensorFlow's gradient returns None for them and drops theirs)."""
    x, scale, offset, mean, variance = (jnp.asarray(a) for a in args)
    fixed = jax.lax.stop_gradient
    y, *stats = _batch_norm(_norm_params(node, x.ndim), x, scale, offset, fixed(mean), fixed(variance))
    return [y, *(fixed(s) for s in stats)]


@functools.partial(jax.jit, static_argnums=0)
def _batch_norm_grad(p: _Norm, dy: Any, x: Any, scale: Any, mean: Any, variance: Any) -> list[Any]:
    reduce, shape, n = _batch_axes(p, x)
    dyu, centered = dy.astype(scale.dtype), x.astype(scale.dtype) - mean.reshape(shape)
    inv = jax.lax.rsqrt(variance + p.epsilon)
    offset_bp = jnp.sum(dyu, axis=reduce)
    dy_centered = jnp.sum(dyu * centered, axis=reduce)
    if p.training:
        dx = (scale * inv).reshape(shape) * (
            dyu - (offset_bp / n).reshape(shape) - centered * (dy_centered / n * inv * inv).reshape(shape))
    else:
        dx = dyu * (scale * inv).reshape(shape)
    zero = jnp.zeros((), scale.dtype)
    return [dx.astype(x.dtype), dy_centered * inv, offset_bp, zero, zero]


@_reg("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
def _fused_batch_norm_grad(node: Node, args: list[Any]) -> list[Any]:
    """``(y_backprop, x, scale, reserve_space_1, reserve_space_2[, reserve_space_3]) -> (x_backprop,
    scale_backprop, offset_backprop, 0, 0)``: the reserve spaces hold the statistics that
    normalized (the batch's in training, whose dependence on ``x`` the training gradient includes)."""
    dy, x, *rest = (jnp.asarray(a) for a in args[:5])
    return _batch_norm_grad(_norm_params(node, x.ndim), dy, x, *rest)


# -- local response normalization -------------------------------------------------------------
@functools.partial(jax.jit, static_argnums=0)
def _lrn(p: tuple[int, float, float, float], x: Any) -> Any:
    """``x / (bias + alpha * sum of x**2 over depth_radius channels either side) ** beta``."""
    r, bias, alpha, beta = p
    ones = (1,) * (x.ndim - 1)
    sq = jax.lax.reduce_window(x * x, np.zeros((), x.dtype), jax.lax.add, (*ones, 2 * r + 1), (*ones, 1),
                               [(0, 0)] * (x.ndim - 1) + [(r, r)])
    return x * (bias + alpha * sq) ** np.asarray(-beta, x.dtype)


@functools.partial(jax.jit, static_argnums=0)
def _lrn_grad(p: tuple[int, float, float, float], dy: Any, x: Any) -> Any:
    return jax.vjp(lambda v: _lrn(p, v), x)[1](dy)[0]


def _lrn_params(node: Node) -> tuple[int, float, float, float]:
    return (int(node.attr("depth_radius", 5)), float(node.attr("bias", 1.0)), float(node.attr("alpha", 1.0)),
            float(node.attr("beta", 0.5)))


@_reg("LRN")
def _lrn_op(node: Node, args: list[Any]) -> list[Any]:
    return [_lrn(_lrn_params(node), jnp.asarray(args[0]))]


@_reg("LRNGrad")
def _lrn_grad_op(node: Node, args: list[Any]) -> list[Any]:
    """``(input_grads, input_image, output_image)``: the gradient of ``LRN`` at ``input_image``."""
    return [_lrn_grad(_lrn_params(node), jnp.asarray(args[0]), jnp.asarray(args[1]))]


# -- space to batch (dilated convolutions of tf.nn.convolution, depthwise_conv2d's rate) ---------
def _space_to_batch(x: Any, block: list[int], pads: list[tuple[int, int]]) -> Any:
    m = len(block)
    x = jnp.pad(x, [(0, 0), *pads] + [(0, 0)] * (x.ndim - 1 - m))
    b, spatial, rest = x.shape[0], x.shape[1:1 + m], x.shape[1 + m:]
    x = x.reshape((b, *(d for s, k in zip(spatial, block, strict=True) for d in (s // k, k)), *rest))
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, x.ndim))
    return x.transpose(perm).reshape((b * int(np.prod(block)), *(s // k for s, k in zip(spatial, block,
                                                                                          strict=True)), *rest))


def _batch_to_space(x: Any, block: list[int], crops: list[tuple[int, int]]) -> Any:
    m = len(block)
    b, spatial, rest = x.shape[0] // int(np.prod(block)), x.shape[1:1 + m], x.shape[1 + m:]
    x = x.reshape((*block, b, *spatial, *rest))
    perm = [m] + [d for i in range(m) for d in (m + 1 + i, i)] + list(range(1 + 2 * m, x.ndim))
    x = x.transpose(perm).reshape((b, *(s * k for s, k in zip(spatial, block, strict=True)), *rest))
    return x[(slice(None), *(slice(lo, x.shape[1 + i] - hi) for i, (lo, hi) in enumerate(crops)))]


def _block_and_pairs(node: Node, block: Any, pairs: Any) -> tuple[list[int], list[tuple[int, int]]]:
    pairs = static_value(node, pairs, "paddings")
    if block is None:  # SpaceToBatch / BatchToSpace: a square block from the attribute
        block = np.full(len(pairs), int(node.attr("block_size")))
    block = [int(v) for v in np.reshape(static_value(node, block, "block_shape"), -1)]
    return block, [(int(lo), int(hi)) for lo, hi in np.reshape(pairs, (-1, 2))]


@_reg("SpaceToBatchND", "SpaceToBatch")
def _space_to_batch_op(node: Node, args: list[Any]) -> list[Any]:
    x, block, pads = (args[0], None, args[1]) if node.op == "SpaceToBatch" else args
    block, pads = _block_and_pairs(node, block, pads)
    _ops_checks.space_to_batch(node, block, pads, np.shape(x)[1:])
    return [_space_to_batch(jnp.asarray(x), block, pads)]


@_reg("BatchToSpaceND", "BatchToSpace")
def _batch_to_space_op(node: Node, args: list[Any]) -> list[Any]:
    x, block, crops = (args[0], None, args[1]) if node.op == "BatchToSpace" else args
    block, crops = _block_and_pairs(node, block, crops)
    _ops_checks.batch_to_space(node, block, crops, np.shape(x))
    return [_batch_to_space(jnp.asarray(x), block, crops)]


def _space_to_depth(x: Any, block: int) -> Any:
    n, h, w, c = x.shape
    x = x.reshape(n, h // block, block, w // block, block, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(n, h // block, w // block, block * block * c)


def _depth_to_space(x: Any, block: int) -> Any:
    n, h, w, c = x.shape
    x = x.reshape(n, h, w, block, block, c // (block * block)).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(n, h * block, w * block, c // (block * block))


@_reg("SpaceToDepth", "DepthToSpace")
def _space_depth(node: Node, args: list[Any]) -> list[Any]:
    """Blocks of ``block_size``² pixels as channels (ordered row, column, channel) and back;
    ``NCHW`` is the same on the transposed input."""
    x, block = jnp.asarray(args[0]), int(node.attr("block_size"))
    fn = _space_to_depth if node.op == "SpaceToDepth" else _depth_to_space
    if _channels_first(node):
        return [fn(x.transpose(0, 2, 3, 1), block).transpose(0, 3, 1, 2)]
    return [fn(x, block)]


# -- softmax and cross entropy ----------------------------------------------------------------
def _log_softmax(xp: Any, logits: Any) -> Any:
    if np.size(logits) == 0:  # (TensorFlow's kernel returns the empty tensor; a max over no entries has no value)
        return logits
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))


simple(("Softmax",), lambda xp, x: xp.exp(_log_softmax(xp, x)))
simple(("LogSoftmax",), _log_softmax)


@_reg("SoftmaxCrossEntropyWithLogits")
def _softmax_cross_entropy(node: Node, args: list[Any]) -> list[Any]:
    """(loss, backprop): ``-sum(labels * log_softmax(logits))`` and ``softmax(logits) - labels``."""
    logits, labels = args
    xp = xp_of(logits, labels)
    log_p = _log_softmax(xp, logits)
    labels = xp.broadcast_to(labels, np.broadcast_shapes(np.shape(logits), np.shape(labels)))
    return [as_numpy(-xp.sum(labels * log_p, axis=-1)), as_numpy(xp.exp(log_p) - labels)]


@_reg("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_cross_entropy(node: Node, args: list[Any]) -> list[Any]:
    """(loss, backprop) for integer labels. A label outside ``[0, classes)`` fails with TensorFlow's CPU
    kernel's text (from compiled code too; its row is NaN there, as TensorFlow's GPU kernel gives)."""
    logits, labels = args
    xp = xp_of(logits, labels)
    classes = np.shape(logits)[-1]
    _ops_checks.labels(node, labels, classes)
    log_p = _log_softmax(xp, logits)
    onehot = (xp.arange(classes) == labels[..., None]).astype(log_p.dtype)
    valid = (labels >= 0) & (labels < classes)
    nan = np.asarray(np.nan, log_p.dtype)
    loss = xp.where(valid, -xp.sum(onehot * log_p, axis=-1), nan)
    backprop = xp.where(valid[..., None], xp.exp(log_p) - onehot, nan)
    return [as_numpy(loss), as_numpy(backprop)]


# -- activations and the small ops of tf.compat.v1.nn and tf.compat.v1.losses -----------------
def _div_no_nan(xp: Any, a: Any, b: Any) -> Any:
    """``a / b``, and 0 where ``b`` is 0 (the division is masked too, so its gradient has no NaN)."""
    zero = b == 0
    quotient = _derivatives.divide(xp, a, xp.where(zero, xp.ones_like(b), b))  # (TensorFlow's derivative)
    return xp.where(zero, xp.zeros_like(quotient), quotient)


for _name, _fn in {
    "Selu": _derivatives.selu, "SeluGrad": _derivatives.selu_grad,
    "Softsign": lambda xp, x: x / (1 + xp.abs(x)),
    "SoftsignGrad": lambda xp, dy, x: dy / xp.square(1 + xp.abs(x)),
    "SoftplusGrad": lambda xp, dy, x: dy * (jax.nn.sigmoid(x) if xp is jnp else (1 / (1 + np.exp(-x))).astype(x.dtype)),
    "DivNoNan": _div_no_nan,
    "MulNoNan": lambda xp, x, y: np.where(y == 0, np.zeros_like(x * y), x * y) if xp is np else _derivatives.mul_no_nan(x, y),
}.items():
    simple((_name,), _fn)


@_reg("LeakyRelu")
def _leaky_relu(node: Node, args: list[Any]) -> list[Any]:
    (x,) = args
    alpha = np.asarray(node.attr("alpha", 0.2), x.dtype)
    return [as_numpy(xp_of(x).where(x > 0, x, x * alpha))]


@_reg("LeakyReluGrad")
def _leaky_relu_grad(node: Node, args: list[Any]) -> list[Any]:
    dy, x = args
    alpha = np.asarray(node.attr("alpha", 0.2), dy.dtype)
    return [as_numpy(xp_of(dy, x).where(x > 0, dy, dy * alpha))]


@_reg("InTopKV2", "InTopK")
def _in_top_k(node: Node, args: list[Any]) -> list[Any]:
    """Whether ``predictions[i, targets[i]]`` is among the ``k`` largest of its row: fewer than ``k``
    predictions exceed it (ties count in); an out-of-range target or a non-finite prediction is False."""
    predictions, targets = jnp.asarray(args[0]), jnp.asarray(args[1])
    k = node.attr("k") if node.op == "InTopK" else static_value(node, args[2], "k")
    classes = predictions.shape[1]
    valid = (targets >= 0) & (targets < classes)
    target = jnp.take_along_axis(predictions, jnp.clip(targets, 0, classes - 1)[:, None].astype(jnp.int32), 1)
    above = jnp.sum(predictions > target, axis=1)
    return [valid & jnp.isfinite(target[:, 0]) & (above < int(k))]
