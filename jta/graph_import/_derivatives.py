"""TensorFlow's derivatives for the elementwise ops where JAX's differ.

``jax.grad`` of an imported forward must be TensorFlow's tape gradient, and JAX's derivative of the
``jnp`` expression an op is written with is not always TensorFlow's registered gradient: at a kink or
a tie JAX splits the difference (``maximum``: half to each side; ``relu``, ``relu6``, ``elu`` through
``maximum``/``clip``: half), ``abs'(0)`` is 1 in JAX and ``sign(0) = 0`` in TensorFlow, and where
TensorFlow's gradient kernel returns 0 for a zero upstream gradient (``SqrtGrad``, ``RsqrtGrad``,
``ReciprocalGrad``: so ``tf.norm`` of a zero row gives no NaN), JAX computes ``0 * inf``. Each op
here is the ``jnp`` expression with a ``jax.custom_jvp`` whose tangent is the TensorFlow gradient
kernel's formula with ``dy`` the tangent (elementwise, so the same rule serves both directions), and
the imported gradient ops (``SqrtGrad``, ``SeluGrad``, ...) are those kernels. On NumPy values (an
op on constants, computed while tracing) each is the plain expression.

TensorFlow's "0 where the upstream gradient is 0" is :func:`mul_no_nan` (TensorFlow's ``MulNoNan``):
a primitive that is linear in its second operand, so ``jax.grad`` transposes it (``jnp.where`` of a
tangent's own value cannot be transposed).

```python
>>> import jax, jax.numpy as jnp
>>> from jta.graph_import._derivatives import relu, sqrt
>>> jax.grad(lambda x: relu(jnp, x))(0.0), jax.grad(lambda x: jnp.sum(sqrt(jnp, x) * 0.0))(jnp.zeros(2))
(Array(0., dtype=float32, weak_type=True), Array([0., 0.], dtype=float32))

```
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as special
import numpy as np
from jax._src import core
from jax._src.interpreters import ad
from jax.interpreters import batching, mlir

SELU_SCALE, SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717


# -- mul_no_nan: x * y, and 0 where y is 0 (even where x is infinite or NaN) -----------------------
def _mul_no_nan_impl(x: Any, y: Any) -> Any:
    return jnp.where(y == 0, jnp.zeros_like(x), x * y)


mul_no_nan_p = core.Primitive("jta_mul_no_nan")
mul_no_nan_p.def_impl(_mul_no_nan_impl)
mul_no_nan_p.def_abstract_eval(lambda x, y: core.ShapedArray(x.shape, x.dtype))
mlir.register_lowering(mul_no_nan_p, mlir.lower_fun(_mul_no_nan_impl, multiple_results=False))
batching.defbroadcasting(mul_no_nan_p)


def mul_no_nan(x: Any, y: Any) -> Any:
    """``x * y`` elementwise, and 0 where ``y`` is 0 even where ``x`` is infinite or NaN."""
    dtype = jnp.result_type(x, y)
    x, y = jnp.broadcast_arrays(jnp.asarray(x, dtype), jnp.asarray(y, dtype))
    return mul_no_nan_p.bind(x, y)


# Bilinear, each side guarded by the other: the cotangent of ``y`` is ``x * ct`` (0 where ``ct`` is 0),
# of ``x`` (a second derivative) ``ct * y`` (0 where ``y`` is 0).
ad.defbilinear(mul_no_nan_p, lambda ct, x, y: mul_no_nan(ct, y), lambda ct, x, y: mul_no_nan(x, ct))


# -- ops with TensorFlow's derivative -------------------------------------------------------------
def _with_tangent(forward: Callable[..., Any], tangent: Callable[..., Any]) -> Callable[..., Any]:
    """``forward`` (on JAX values) whose derivative is ``tangent(out, *primals, *tangents)``."""
    fn = jax.custom_jvp(forward)

    def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        out = forward(*primals)
        return out, tangent(out, *primals, *tangents)

    fn.defjvp(jvp)
    return fn


def _real_floating(*xs: Any) -> bool:
    return all(jnp.issubdtype(jnp.result_type(x), jnp.floating) for x in xs)


def _zero(x: Any) -> Any:
    return jnp.zeros_like(x)


# TensorFlow's gradient kernels, ``dy`` the upstream gradient (``cwise_ops_gradients.h``, ``relu_op_functor.h``)
def sqrt_grad(xp: Any, y: Any, dy: Any) -> Any:
    return _guarded(xp, dy, 0.5 / y)


def rsqrt_grad(xp: Any, y: Any, dy: Any) -> Any:
    return _guarded(xp, dy, -0.5 * y * y * y)


def reciprocal_grad(xp: Any, y: Any, dy: Any) -> Any:
    return _guarded(xp, dy, -y * y)


def selu_grad(xp: Any, dy: Any, y: Any) -> Any:
    return xp.where(y < 0, dy * (y + SELU_SCALE * SELU_ALPHA), dy * SELU_SCALE).astype(dy.dtype)


def elu_grad(xp: Any, dy: Any, y: Any) -> Any:
    return xp.where(y < 0, dy * (y + 1), dy)


def _guarded(xp: Any, dy: Any, factor: Any) -> Any:
    """``dy * factor``, 0 where ``dy`` is 0 (TensorFlow's kernels: no ``0 * inf``)."""
    if xp is np:
        return np.where(dy == 0, np.zeros_like(dy), dy * factor)
    return mul_no_nan(factor, dy)


# The forward formulas, on NumPy or JAX values (``xp``); each op is its formula and TensorFlow's tangent.
def _relu(xp: Any, x: Any) -> Any:
    return xp.maximum(x, xp.zeros_like(x))


def _relu6(xp: Any, x: Any) -> Any:
    return xp.clip(x, xp.zeros_like(x), xp.full_like(x, 6))


def _elu(xp: Any, x: Any) -> Any:
    return xp.where(x > 0, x, xp.expm1(xp.minimum(x, xp.zeros_like(x))))


def _selu(xp: Any, x: Any) -> Any:
    negative = (SELU_SCALE * SELU_ALPHA) * xp.expm1(xp.minimum(x, xp.zeros_like(x)))
    return xp.where(x > 0, SELU_SCALE * x, negative).astype(x.dtype)


def _xdivy(xp: Any, x: Any, y: Any) -> Any:
    return xp.where(x == 0, xp.zeros_like(x * y), x / xp.where(x == 0, xp.ones_like(y), y))


def _xlogy(xp: Any, x: Any, y: Any) -> Any:
    return xp.where(x == 0, xp.zeros_like(x * y), x * xp.log(xp.where(x == 0, xp.ones_like(y), y)))


def _xlog1py(xp: Any, x: Any, y: Any) -> Any:
    return xp.where(x == 0, xp.zeros_like(x * y), x * xp.log1p(xp.where(x == 0, xp.zeros_like(y), y)))


def _on_jax(formula: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args: formula(jnp, *args)


_SQRT = _with_tangent(jnp.sqrt, lambda y, x, t: sqrt_grad(jnp, y, t))
_RSQRT = _with_tangent(lambda x: 1 / jnp.sqrt(x), lambda y, x, t: rsqrt_grad(jnp, y, t))
_RECIPROCAL = _with_tangent(jnp.reciprocal, lambda y, x, t: reciprocal_grad(jnp, y, t))
_RELU = _with_tangent(_on_jax(_relu), lambda y, x, t: jnp.where(y > 0, t, _zero(t)))
_RELU6 = _with_tangent(_on_jax(_relu6), lambda y, x, t: jnp.where((x > 0) & (x < 6), t, _zero(t)))
_ELU = _with_tangent(_on_jax(_elu), lambda y, x, t: elu_grad(jnp, t, y))
_SELU = _with_tangent(_on_jax(_selu), lambda y, x, t: selu_grad(jnp, t, y))
# TensorFlow's _AcoshGrad is dy / sinh(y): NaN outside the domain, where JAX's formula is finite
_ACOSH = _with_tangent(jnp.arccosh, lambda y, x, t: t / jnp.sinh(y))
_ABS = _with_tangent(jnp.abs, lambda y, x, t: t * jnp.sign(x))
# TensorFlow's _BesselI0Grad is I1 (JAX's rule of exp(|x|) i0e(x) gives |x|'s 1 at 0); _BesselI1Grad is
# I0 - I1 / x with 1 at 0 (TensorFlow's choice; the limit is 1/2). (On JAX values only: the op is JAX's.)
bessel_i0 = _with_tangent(special.i0, lambda y, x, t: special.i1(x) * t)
bessel_i1 = _with_tangent(special.i1, lambda y, x, t: jnp.where(
    x == 0, 1, special.i0(x) - y / jnp.where(x == 0, 1, x)).astype(t.dtype) * t)
# TensorFlow's _MaximumGrad/_MinimumGrad: on a tie the whole gradient goes to x
_MAXIMUM = _with_tangent(jnp.maximum, lambda out, x, y, tx, ty: jnp.where(x >= y, tx, ty))
_MINIMUM = _with_tangent(jnp.minimum, lambda out, x, y, tx, ty: jnp.where(x <= y, tx, ty))
# TensorFlow's _XLogyGrad/_XLog1pyGrad: d/dx is xlogy(x != 0, y), 0 where x is 0 (JAX: log(y), -inf at 0)
_XLOGY = _with_tangent(_on_jax(_xlogy), lambda out, x, y, tx, ty: tx * _xlogy(jnp, (x != 0).astype(x.dtype), y)
                       + ty * _xdivy(jnp, x, y))
_XLOG1PY = _with_tangent(_on_jax(_xlog1py), lambda out, x, y, tx, ty: tx * _xlog1py(jnp, (x != 0).astype(x.dtype), y)
                         + ty * _xdivy(jnp, x, y + 1))

# TensorFlow's _PowGrad: d/dy is z * log(x) where x > 0, else 0 (JAX's log(x) * z: NaN at a negative base)
_POW = _with_tangent(jnp.power, lambda z, x, y, tx, ty: tx * y * jnp.power(x, y - 1)
                     + ty * z * jnp.where(x > 0, jnp.log(jnp.where(x > 0, x, 1)), 0))
# TensorFlow's _RealDivGrad/_DivGrad: d/dy is dy * ((-x / y) / y), each division rounded, where JAX's
# -dy * x * y**-2 overflows once y**2 does (a solver's last step: BiCGSTAB's omega; a softmax written by
# hand over large logits: a wrong finite gradient); the barrier keeps XLA from fusing the two divisions
# into x / (y * y), which overflows the same way
_DIVIDE = _with_tangent(jnp.true_divide, lambda z, x, y, tx, ty: tx / y
                        + ty * (jax.lax.optimization_barrier(-x / y) / y))


def _either(plain: Callable[..., Any], tf_derivative: Callable[..., Any]) -> Callable[..., Any]:
    """``op(xp, *args)``: ``plain`` on NumPy values and on integers and complex numbers (whose kernels
    differ: a complex gradient is conjugated), else ``tf_derivative``."""
    def op(xp: Any, *args: Any) -> Any:
        if xp is np or not _real_floating(*args):
            return plain(xp, *args)
        return tf_derivative(*args)
    return op


sqrt = _either(lambda xp, x: xp.sqrt(x), _SQRT)
rsqrt = _either(lambda xp, x: 1 / xp.sqrt(x), _RSQRT)
reciprocal = _either(lambda xp, x: 1 / x, _RECIPROCAL)
relu = _either(_relu, _RELU)
relu6 = _either(_relu6, _RELU6)
elu = _either(_elu, _ELU)
selu = _either(_selu, _SELU)
acosh = _either(lambda xp, x: xp.arccosh(x), _ACOSH)
absolute = _either(lambda xp, x: xp.abs(x), _ABS)
xlogy = _either(_xlogy, _XLOGY)
xlog1py = _either(_xlog1py, _XLOG1PY)
xdivy = _xdivy
maximum = _either(lambda xp, a, b: xp.maximum(a, b), _MAXIMUM)
minimum = _either(lambda xp, a, b: xp.minimum(a, b), _MINIMUM)
power = _either(lambda xp, a, b: xp.power(a, b), _POW)
_divide = _either(lambda xp, a, b: xp.true_divide(a, b), _DIVIDE)
# The traced quotients of this process, by id: a quotient divided again, or divided by, is held apart by
# a barrier, as XLA would fuse (a / b) / c into a / (b * c) and a / (b / c) into (a * c) / b, whose
# products overflow or underflow where TensorFlow's kernels, one division at a time, do not
# (TensorFlow's gradient of a division is such a pair)
_QUOTIENTS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def divide(xp: Any, a: Any, b: Any) -> Any:
    """``a / b`` rounded as TensorFlow's kernel rounds it, with TensorFlow's derivative."""
    if xp is np:
        return np.true_divide(a, b)
    a, b = (jax.lax.optimization_barrier(v) if _QUOTIENTS.get(id(v)) is v else v for v in (a, b))
    out = _divide(xp, a, b)
    _QUOTIENTS[id(out)] = out
    return out
