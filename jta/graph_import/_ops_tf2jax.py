"""The op types tf2jax also converts, beyond what TF1 gradient graphs consist of: special
functions, bitwise and complex math, more shapes, scans, scatters and gathers.

Registered into :data:`jta.graph_import._ops.OPS` (importing this module files them), with the
helpers of :mod:`jta.graph_import._ops`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _derivatives, _ops_checks
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, as_numpy, is_static, registrar, result_dtype, simple, static_value, xp_of

_reg = registrar(OPS)


# -- more elementwise math: the op types tf2jax also converts ----------------------------------
def _special(fn_name: str) -> Callable[..., Any]:
    """A special function: ``scipy.special`` on static values, ``jax.scipy.special`` on traced ones."""
    import jax.scipy.special as jax_special
    import scipy.special as scipy_special

    def fn(xp: Any, *args: Any) -> Any:
        if xp is np:
            return np.asarray(getattr(scipy_special, fn_name)(*args)).astype(np.result_type(*args))
        return getattr(jax_special, fn_name)(*args)
    return fn


def _truncate_div(xp: Any, a: Any, b: Any) -> Any:
    """TF's ``Div``: true division of floats, division rounded toward zero of integers."""
    if not np.issubdtype(result_dtype(a, b), np.integer):
        return _derivatives.divide(xp, a, b)
    q = xp.floor_divide(a, b)
    return xp.where((q < 0) & (q * b != a), q + 1, q)


def _shift_amount(xp: Any, a: Any, b: Any) -> Any:
    """A shift's amount as TensorFlow's kernel takes it: clamped to ``[0, bits - 1]`` (XLA shifts past the
    width to 0 or -1)."""
    return xp.clip(b, 0, np.iinfo(xp.asarray(a).dtype).bits - 1)


_BINARY_MORE: dict[str, Callable[..., Any]] = {
    "Xlogy": _derivatives.xlogy, "Xlog1py": _derivatives.xlog1py, "Xdivy": _derivatives.xdivy,
    "Atan2": lambda xp, a, b: xp.arctan2(a, b), "Div": _truncate_div,
    "BitwiseAnd": lambda xp, a, b: xp.bitwise_and(a, b), "BitwiseOr": lambda xp, a, b: xp.bitwise_or(a, b),
    "BitwiseXor": lambda xp, a, b: xp.bitwise_xor(a, b),
    "LeftShift": lambda xp, a, b: xp.left_shift(a, _shift_amount(xp, a, b)),
    "RightShift": lambda xp, a, b: xp.right_shift(a, _shift_amount(xp, a, b)),
    "Igamma": _special("gammainc"), "Igammac": _special("gammaincc"), "Polygamma": lambda xp, n, x: _special("polygamma")(xp, n, x) if xp is np else jax.lax.polygamma(
        jnp.asarray(n, jnp.result_type(n, x)), jnp.asarray(x, jnp.result_type(n, x))),
    "Complex": lambda xp, re, im: xp.add(re, xp.multiply(im, 1j)).astype(np.result_type(result_dtype(re), np.complex64)),
    "EluGrad": _derivatives.elu_grad,
    "Relu6Grad": lambda xp, dy, x: xp.where((x > 0) & (x < 6), dy, xp.zeros_like(dy)),
}
_UNARY_MORE: dict[str, Callable[..., Any]] = {
    "Atan": lambda xp, x: xp.arctan(x), "Asin": lambda xp, x: xp.arcsin(x), "Acos": lambda xp, x: xp.arccos(x),
    "IsNan": lambda xp, x: xp.isnan(x), "IsInf": lambda xp, x: xp.isinf(x),
    "Angle": lambda xp, x: xp.angle(x).astype(xp.real(x).dtype),
    "Tan": lambda xp, x: xp.tan(x), "Sinh": lambda xp, x: xp.sinh(x), "Cosh": lambda xp, x: xp.cosh(x),
    "Asinh": lambda xp, x: xp.arcsinh(x), "Acosh": _derivatives.acosh,
    "Atanh": lambda xp, x: xp.arctanh(x), "Expm1": lambda xp, x: xp.expm1(x), "Log1p": lambda xp, x: xp.log1p(x),
    "Erf": _special("erf"), "Erfc": _special("erfc"), "Erfinv": _special("erfinv"),
    "Lgamma": _special("gammaln"), "Digamma": _special("digamma"),
    "IsFinite": lambda xp, x: xp.isfinite(x), "Round": lambda xp, x: xp.round(x),
    "Relu6": _derivatives.relu6, "Elu": _derivatives.elu,
    "Invert": lambda xp, x: xp.bitwise_not(x),
    "Real": lambda xp, x: xp.real(x), "Imag": lambda xp, x: xp.imag(x), "Conj": lambda xp, x: xp.conj(x),
    "ComplexAbs": lambda xp, x: xp.abs(x),
    "L2Loss": lambda xp, x: (xp.sum(xp.square(x)) / 2).astype(x.dtype),
}
for _name, _fn in _BINARY_MORE.items():
    simple((_name,), _fn)
for _name, _fn in _UNARY_MORE.items():
    simple((_name,), _fn)


def _checked_first(name: str, check: Callable[..., None]) -> None:
    """``OPS[name]`` after ``check(node, *args)``: TensorFlow's kernel rejects values XLA computes on."""
    plain = OPS[name]

    def op(node: Node, args: list[Any]) -> list[Any]:
        check(node, *args)
        return plain(node, args)
    OPS[name] = op


for _name in ("Div", "FloorDiv", "FloorMod"):
    _checked_first(_name, lambda node, x, y: _ops_checks.divisor(node, y))
_checked_first("Pow", _ops_checks.exponent)


# -- more shapes, scans, scatters and gathers -------------------------------------------------
@_reg("BroadcastArgs")
def _broadcast_args(node: Node, args: list[Any]) -> list[Any]:
    s0, s1 = (static_value(node, a, "the shapes") for a in args)
    return [np.asarray(_ops_checks.broadcast(node, tuple(int(d) for d in s0), tuple(int(d) for d in s1)), s0.dtype)]


@_reg("ConjugateTranspose")
def _conjugate_transpose(node: Node, args: list[Any]) -> list[Any]:
    x, perm = args
    xp = xp_of(x)
    return [as_numpy(xp.conj(xp.transpose(x, _ops_checks.permutation(node, static_value(node, perm, "perm"), np.ndim(x)))))]


@_reg("Cumsum", "Cumprod")
def _cumulative(node: Node, args: list[Any]) -> list[Any]:
    """The running sum (product) along an axis; ``exclusive`` shifts in the identity, ``reverse`` runs
    from the end. A product is differentiated as TensorFlow's gradient does it (:func:`_cumprod`)."""
    x, axis = args
    axis = _ops_checks.scan_axis(node, int(static_value(node, axis, "the axis")), np.ndim(x))
    order = (bool(node.attr("exclusive", False)), bool(node.attr("reverse", False)))
    xp = xp_of(x)
    if node.op == "Cumprod" and xp is jnp and jnp.issubdtype(jnp.result_type(x), jnp.inexact):
        return [_cumprod(jnp.asarray(x), axis, *order)]
    return [as_numpy(_running(xp, x, axis, node.op == "Cumsum", *order))]


def _running(xp: Any, x: Any, axis: int, sum_: bool, exclusive: bool, reverse: bool) -> Any:
    if reverse:
        x = xp.flip(x, axis)
    out = (xp.cumsum if sum_ else xp.cumprod)(x, axis=axis, dtype=x.dtype)
    if exclusive:
        first = (xp.zeros_like if sum_ else xp.ones_like)(xp.take(out, np.arange(1), axis=axis))
        out = xp.concatenate([first, xp.take(out, np.arange(np.shape(x)[axis] - 1), axis=axis)], axis=axis)
    return xp.flip(out, axis) if reverse else out


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _cumprod(x: Any, axis: int, exclusive: bool, reverse: bool) -> Any:
    return _running(jnp, x, axis, False, exclusive, reverse)


@_cumprod.defjvp
def _cumprod_jvp(axis: int, exclusive: bool, reverse: bool, primals: Any, tangents: Any) -> Any:
    # TensorFlow's gradient is div_no_nan(cumsum(prod * dy, exclusive, not reverse), x): 0 where x is 0
    # (a product with a zero entry has a nonzero derivative there; TensorFlow's is 0). Its transpose:
    (x,), (t,) = primals, tangents
    prod = _cumprod(x, axis, exclusive, reverse)
    inverse = jnp.where(x == 0, 0, 1 / jnp.where(x == 0, 1, x))
    return prod, prod * _running(jnp, t * inverse, axis, True, exclusive, reverse)


@_reg("OneHot")
def _one_hot(node: Node, args: list[Any]) -> list[Any]:
    """``on_value`` where the index equals the position along the new axis, ``off_value`` elsewhere
    (a negative or too large index gives a row of ``off_value``)."""
    indices, depth, on, off = args
    depth = int(static_value(node, depth, "the depth"))
    if depth < 0:
        _ops_checks.invalid(node, f"depth must be non-negative, got: {depth}")
    xp = xp_of(indices, on, off)
    hot = xp.expand_dims(indices, -1) == xp.arange(depth).astype(result_dtype(indices))
    axis = int(node.attr("axis", -1))
    if axis != -1:
        hot = xp.moveaxis(hot, -1, axis)
    return [as_numpy(xp.where(hot, on, off))]


@_reg("MatrixBandPart")
def _matrix_band_part(node: Node, args: list[Any]) -> list[Any]:
    """Zeroes the entries more than ``num_lower`` below or ``num_upper`` above the diagonal (a
    negative count keeps that whole triangle)."""
    x, lower, upper = args
    lower = int(static_value(node, lower, "num_lower"))
    upper = int(static_value(node, upper, "num_upper"))
    rows, cols = np.shape(x)[-2:]
    for what, count, dim, of in (("num_lower", lower, rows, "rows"), ("num_upper", upper, cols, "columns")):
        if count > dim:  # (TensorFlow's check, in its order)
            _ops_checks.invalid(node, (
                f"{what} must be negative or less or equal to number of {of} ({dim}) got: {count}"))
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = ((lower < 0) | (-offset <= lower)) & ((upper < 0) | (offset <= upper))
    xp = xp_of(x)
    return [as_numpy(xp.where(keep, x, xp.zeros_like(x)))]


@_reg("Einsum")
def _einsum(node: Node, args: list[Any]) -> list[Any]:
    """``tf.einsum``; an output label repeated (TensorFlow's gradient of a trace or a diagonal writes one,
    ``'ib->bii'``) puts the values on that diagonal, zeros elsewhere, which ``np.einsum`` refuses."""
    equation = node.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    xp = xp_of(*args)
    inputs, _, out = equation.replace(" ", "").partition("->")
    labels = out.replace("...", "")
    if len(set(labels)) == len(labels):
        return [as_numpy(xp.einsum(equation, *args))]
    unique = "".join(dict.fromkeys(out.replace("...", "."))).replace(".", "...")
    y = xp.einsum(f"{inputs}->{unique}", *args)
    sizes = {}
    for spec, a in zip(inputs.split(","), args, strict=True):
        named = spec.replace("...", "")
        at = spec.find("...")
        skip = np.ndim(a) - len(named) if at >= 0 else 0
        for k, label in enumerate(named):
            sizes[label] = np.shape(a)[k + (skip if 0 <= at <= spec.find(label) else 0)]
    fresh = iter(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation)
    seen, renamed, eyes = set(), "", []
    for c in out.replace("...", "."):
        if c in seen:
            new = next(fresh)
            eyes.append((f"{c}{new}", xp.eye(sizes[c], dtype=y.dtype)))
            c = new
        seen.add(c)
        renamed += c
    spec = ",".join([unique, *(e for e, _ in eyes)]) + "->" + renamed.replace(".", "...")
    return [as_numpy(xp.einsum(spec, y, *(m for _, m in eyes)))]


def _nd_index(indices: Any) -> tuple[Any, ...]:
    return tuple(indices[..., k] for k in range(np.shape(indices)[-1]))


@_reg("GatherNd")
def _gather_nd(node: Node, args: list[Any]) -> list[Any]:
    """The slices of ``params`` at the index vectors (``indices``' last axis); with ``batch_dims=b``
    the first ``b`` dimensions of both are batch dimensions, matched one to one (TensorFlow's rule)."""
    params, indices = args
    batch = int(node.attr("batch_dims", 0) or 0)
    if not 0 <= batch < np.ndim(indices) or np.shape(params)[:batch] != np.shape(indices)[:batch]:
        _ops_checks.invalid(node, (
            f"batch_dims={batch} must be in [0, rank(indices)) and params and indices must agree on those "
            f"dimensions (shapes {np.shape(params)} and {np.shape(indices)})"))
    if np.ndim(indices) and np.shape(indices)[-1] > np.ndim(params) - batch:
        _ops_checks.invalid(node, (
            "index innermost dimension length must be <= params rank; saw: "
            f"{np.shape(indices)[-1]} vs. {np.ndim(params) - batch}"))
    _ops_checks.nd(node, indices, np.shape(params)[batch:], GraphError.GATHER_ND_RANGE)
    static = is_static(params) and is_static(indices)
    xp = np if static else jnp
    indices = indices if static else jnp.asarray(indices)
    batches = tuple(xp.arange(n).reshape((n,) + (1,) * (np.ndim(indices) - k - 2))
                    for k, n in enumerate(np.shape(indices)[:batch]))
    return [as_numpy((params if static else jnp.asarray(params))[batches + _nd_index(indices)])]


@_reg("ScatterNd")
def _scatter_nd(node: Node, args: list[Any]) -> list[Any]:
    """The updates summed into zeros of the given shape at the indices."""
    indices, updates, shape = args
    shape = _ops_checks.dimensions(node, static_value(node, shape, "the shape"))
    _ops_checks.scatter_shapes(node, np.shape(indices), np.shape(updates), shape)
    _ops_checks.nd(node, indices, shape, GraphError.SCATTER_ND_RANGE)
    if is_static(indices) and is_static(updates):
        out = np.zeros(shape, np.asarray(updates).dtype)
        np.add.at(out, _nd_index(indices), updates)
        return [out]
    return [jnp.zeros(shape, jnp.asarray(updates).dtype).at[_nd_index(jnp.asarray(indices))].add(updates)]


_SCATTERS = {"TensorScatterUpdate": "set", "TensorScatterAdd": "add", "TensorScatterSub": "add",
             "TensorScatterMax": "max", "TensorScatterMin": "min"}


@_reg(*_SCATTERS)
def _tensor_scatter(node: Node, args: list[Any]) -> list[Any]:
    """``tensor`` with ``updates`` set, added, subtracted, or kept where larger (smaller) at ``indices``."""
    tensor, indices, updates = args
    _ops_checks.nd(node, indices, np.shape(tensor), GraphError.SCATTER_ND_RANGE)
    if node.op == "TensorScatterUpdate":
        return [_scatter_update(jnp.asarray(tensor), jnp.asarray(indices), jnp.asarray(updates, result_dtype(tensor)))]
    index = _nd_index(jnp.asarray(indices))
    updates = -jnp.asarray(updates) if node.op == "TensorScatterSub" else updates
    return [getattr(jnp.asarray(tensor).at[index], _SCATTERS[node.op])(updates)]


@jax.custom_vjp
def _scatter_update(tensor: Any, indices: Any, updates: Any) -> Any:
    """``tensor`` with ``updates`` set at ``indices``; TensorFlow's gradient (``_TensorScatterUpdateGrad``)
    gives every update its place's gradient, also one a later update overwrote."""
    return tensor.at[_nd_index(indices)].set(updates)


_scatter_update.defvjp(lambda t, i, u: (_scatter_update(t, i, u), i),
                       lambda i, g: (g.at[_nd_index(i)].set(0), None, g[_nd_index(i)]))


@_reg("UnravelIndex")
def _unravel_index(node: Node, args: list[Any]) -> list[Any]:
    """``tf.unravel_index``: each flat index's coordinates in ``dims`` (a row per dimension), as TensorFlow's
    kernel computes them: ``index / stride % dim`` in C's integer arithmetic (a negative index is not checked,
    and rounds towards zero), after its checks (no dimension of zero; every index below their product)."""
    indices, dims = args
    shape = tuple(int(d) for d in static_value(node, dims, "dims"))
    for k, d in enumerate(shape):
        if d == 0:
            _ops_checks.invalid(node, f"Input dims cannot contain a dim of zero, but dims contains zero at index {k}")
    xp = xp_of(indices)
    indices = xp.asarray(indices)
    _ops_checks.invalid_where(node, xp.any(indices >= int(np.prod(shape, dtype=np.int64))), "index is out of bound as with dims")
    strides = np.cumprod((*shape[1:], 1)[::-1])[::-1]
    rows = [_truncate_mod(xp, _truncate_div(xp, indices, np.asarray(s, indices.dtype)), np.asarray(d, indices.dtype))
            for s, d in zip(strides, shape, strict=True)]
    out = xp.stack(rows) if shape else xp.zeros((0, *np.shape(indices)), indices.dtype)
    return [as_numpy(out.astype(indices.dtype))]


def _truncate_mod(xp: Any, a: Any, b: Any) -> Any:
    """``a % b`` of integers as C takes it (the sign of ``a``), the remainder of :func:`_truncate_div`."""
    return a - _truncate_div(xp, a, b) * b


@_reg("InplaceUpdate", "InplaceAdd")
def _inplace(node: Node, args: list[Any]) -> list[Any]:
    """Rows ``i`` of ``x`` replaced by (increased by) ``v``. TensorFlow's kernel takes each row modulo the
    rows of ``x`` (its guard of the index's range), where JAX would drop it."""
    x, rows, v = args
    at = jnp.asarray(x).at[jnp.mod(jnp.asarray(rows), max(np.shape(x)[0], 1))]
    return [at.set(v) if node.op == "InplaceUpdate" else at.add(v)]


@_reg("Empty")
def _empty(node: Node, args: list[Any]) -> list[Any]:
    """A tensor of the shape; TensorFlow leaves it uninitialized unless ``init``, zeros are one such value."""
    return [np.zeros(_ops_checks.dimensions(node, static_value(node, args[0], "the shape")), node.attr("dtype"))]


@_reg("TopKV2")
def _top_k(node: Node, args: list[Any]) -> list[Any]:
    """The ``k`` largest values along the last axis, largest first, and their indices (int32); ties
    keep the lower index first. ``-0.0`` ties with ``0.0``, as TensorFlow compares them (XLA's sort
    orders them: ascending ``tf.sort``/``tf.argsort``, ``top_k`` of the negated values, would swap
    them), so the indices are sorted by keys with zeros made positive and the values gathered."""
    x, k = jnp.asarray(args[0]), int(static_value(node, args[1], "k"))
    if k < 0:
        _ops_checks.invalid(node, f"Need k >= 0, got {k}")
    if x.ndim and x.shape[-1] < k:
        _ops_checks.invalid(node, (
            f"input must have at least k columns. Had {x.shape[-1]}, needed {k}"))
    if not jnp.issubdtype(x.dtype, jnp.floating):
        values, indices = jax.lax.top_k(x, k)
        return [values, indices.astype(np.int32)]
    _, indices = jax.lax.top_k(jnp.where(x == 0, jnp.zeros_like(x), x), k)
    return [jnp.take_along_axis(x, indices, axis=-1), indices.astype(np.int32)]


@_reg("Roll")
def _roll(node: Node, args: list[Any]) -> list[Any]:
    """``input`` rolled by ``shift`` along ``axis`` (scalars or vectors of one length; shifts of a
    repeated axis add up). The shift may be a run-time value, the axes must be static."""
    x, shift, axis = args
    axes = _ops_checks.roll_axes(node, static_value(node, axis, "the axis"), shift, np.ndim(x))
    xp = xp_of(x, shift)
    if np.ndim(shift) == 0 and np.ndim(axis) == 0:
        return [as_numpy(xp.roll(x, shift, axis=axes[0]))]
    shifts = tuple(int(v) for v in np.reshape(shift, -1)) if is_static(shift) else jnp.reshape(shift, -1)
    return [as_numpy(xp.roll(x, shifts, axis=axes))]


@_reg("CumulativeLogsumexp")
def _cumulative_logsumexp(node: Node, args: list[Any]) -> list[Any]:
    """``log(cumsum(exp(x)))`` along an axis, computed stably; ``exclusive`` shifts in ``-inf`` (the
    log of an empty sum), ``reverse`` runs from the end."""
    x, axis = args
    axis = _ops_checks.scan_axis(node, int(static_value(node, axis, "the axis")), np.ndim(x))
    reverse, exclusive = bool(node.attr("reverse", False)), bool(node.attr("exclusive", False))
    if is_static(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            flipped = np.flip(x, axis) if reverse else x
            out = np.logaddexp.accumulate(flipped, axis=axis).astype(x.dtype)
            out = np.flip(out, axis) if reverse else out
    else:
        out = jax.lax.cumlogsumexp(jnp.asarray(x), axis=axis, reverse=reverse)
    if exclusive:
        xp = xp_of(out)
        n = np.shape(x)[axis]
        first = xp.full_like(xp.take(out, np.arange(min(n, 1)), axis=axis), -np.inf)
        kept = xp.take(out, np.arange(1, n) if reverse else np.arange(n - 1), axis=axis)
        out = xp.concatenate([kept, first] if reverse else [first, kept], axis=axis)
    return [as_numpy(out)]
