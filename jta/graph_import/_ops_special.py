"""Special functions: ``tf.math.betainc``, ``tf.math.zeta``, the modified Bessel functions
(``tf.math.bessel_i0``, ``bessel_i0e``, ``bessel_i1``, ``bessel_i1e``), the incomplete gamma functions
(``tf.math.igamma``, ``igammac``) with their gradient ops (``IgammaGradA``; ``RandomGammaGrad``, of
``tf.random.gamma``), ``tf.math.polygamma`` and ``tf.math.ndtri``, as ``jax.scipy.special``'s / ``jax.lax``'s.

Their derivatives are TensorFlow's registered gradients: ``betainc`` is differentiated in ``x`` only,
``zeta`` in ``q`` only and ``polygamma`` in ``x`` only (TensorFlow returns None for the other operands), so
those operands are constants to ``jax.grad`` here; ``bessel_i0`` and ``bessel_i1`` take TensorFlow's
formulas at 0 (:mod:`._derivatives`), ``igamma`` its ``IgammaGradA`` and log-space ``x`` formula, ``ndtri``
its ``sqrt(2 pi) exp(y**2 / 2)``. The incomplete gamma functions take Eigen's values (TensorFlow's kernels)
at the edges of their domain, where JAX's follow SciPy or give NaN.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import jax.scipy.special as special
import numpy as np

from . import _derivatives, _ops_tf2jax  # noqa: F401 (first: its Igamma, Igammac, Polygamma are replaced here)
from ._nodes import Node
from ._ops import OPS, registrar

_reg = registrar(OPS)

_BESSEL = {"BesselI0": _derivatives.bessel_i0, "BesselI0e": special.i0e, "BesselI1": _derivatives.bessel_i1,
           "BesselI1e": special.i1e}


@_reg(*_BESSEL)
def _bessel(node: Node, args: list[Any]) -> list[Any]:
    (x,) = args
    return [_BESSEL[node.op](jnp.asarray(x))]


@_reg("Betainc")
def _betainc(node: Node, args: list[Any]) -> list[Any]:
    """The regularized incomplete beta function ``I_x(a, b)``."""
    a, b, x = (jnp.asarray(v) for v in args)
    fixed = jax.lax.stop_gradient
    return [special.betainc(fixed(a), fixed(b), x)]


@_reg("Zeta")
def _zeta(node: Node, args: list[Any]) -> list[Any]:
    """The Hurwitz zeta function ``sum((q + n) ** -x)``."""
    x, q = (jnp.asarray(v) for v in args)
    return [special.zeta(jax.lax.stop_gradient(x), q)]


# -- the incomplete gamma functions: Eigen's (TensorFlow's) values at the domain's edges ----------
# JAX's igamma follows SciPy at a = 0 (1, where Eigen's prelude gives NaN) and gives NaN where Eigen's
# kernel gives its limit (x == 0: 0 for any a; a or x infinite); each op here is JAX's inside the domain
# and Eigen's prelude outside (``igamma_generic_impl``: ``x == 0`` first, then ``x < 0 || a <= 0`` or NaN).
def _eigen_edges(a: Any, x: Any, out: Any, at_x_zero: Optional[float], a_infinite: float,
                 x_infinite: Optional[float]) -> Any:
    """``out`` with Eigen's values: ``a_infinite`` where ``a`` is +inf (its series' limit; for ``Q``,
    whose ``x_zero`` rule is None, where ``x`` is finite: Eigen's continued fraction gives ``Q(inf, inf) = 0``,
    as JAX does), ``x_infinite`` where ``x`` is +inf and ``a`` finite, NaN outside the domain, ``at_x_zero``
    at ``x == 0`` (Eigen's ``P`` and its derivatives check it first)."""
    dtype = out.dtype
    x_in_range = (x >= 0) if at_x_zero is not None else (x >= 0) & (x < jnp.inf)
    out = jnp.where((a == jnp.inf) & x_in_range, jnp.asarray(a_infinite, dtype), out)
    if x_infinite is not None:
        out = jnp.where((x == jnp.inf) & jnp.isfinite(a), jnp.asarray(x_infinite, dtype), out)
    out = jnp.where((x < 0) | (a <= 0) | jnp.isnan(a) | jnp.isnan(x), jnp.asarray(jnp.nan, dtype), out)
    return out if at_x_zero is None else jnp.where(x == 0, jnp.asarray(at_x_zero, dtype), out)


def igamma_grad_a(a: Any, x: Any) -> Any:
    """``d igamma(a, x) / da`` (TensorFlow's ``IgammaGradA``)."""
    return _eigen_edges(a, x, jax.lax.igamma_grad_a(a, x), 0.0, 0.0, -0.0)


def _igamma_grad_x(a: Any, x: Any) -> Any:
    """TensorFlow's ``_IgammaGrad`` for ``x``, in log space: ``exp(-x + (a - 1) log x - lgamma(a))``."""
    return jnp.exp(-x + (a - 1) * jnp.log(x) - jax.lax.lgamma(a))


@jax.custom_jvp
def _igamma(a: Any, x: Any) -> Any:
    return _eigen_edges(a, x, jax.lax.igamma(a, x), 0.0, 0.0, None)


@jax.custom_jvp
def _igammac(a: Any, x: Any) -> Any:
    return _eigen_edges(a, x, jax.lax.igammac(a, x), None, 1.0, None)


def _igamma_jvp(sign: int, fn: Any, primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[Any, Any]:
    """TensorFlow's gradient (``_IgammaGrad``; ``_IgammacGrad`` negates it): ``IgammaGradA`` for ``a``."""
    (a, x), (ta, tx) = primals, tangents
    return fn(a, x), sign * (igamma_grad_a(a, x) * ta + _igamma_grad_x(a, x) * tx)


_igamma.defjvp(lambda p, t: _igamma_jvp(1, _igamma, p, t))
_igammac.defjvp(lambda p, t: _igamma_jvp(-1, _igammac, p, t))


def random_gamma_grad(a: Any, x: Any) -> Any:
    # (a wrapper of JAX's passes the dtype: its signature's ``dtype`` is not the caller's)
    return _eigen_edges(a, x, jax.lax.random_gamma_grad(a, x), 0.0, 0.0, -0.0)  # pyright: ignore[reportCallIssue]


_GAMMA = {"Igamma": _igamma, "Igammac": _igammac, "IgammaGradA": igamma_grad_a, "RandomGammaGrad": random_gamma_grad}


@_reg(*_GAMMA)
def _gamma(node: Node, args: list[Any]) -> list[Any]:
    """The regularized incomplete gamma functions ``P(a, x)`` (``tf.math.igamma``) and ``Q(a, x) = 1 - P``
    (``igammac``), ``dP/da`` (their gradient's op) and ``RandomGammaGrad``, ``d sample / d alpha`` of a
    ``Gamma(alpha)`` sample ``x`` (``tf.random.gamma``'s gradient), broadcast. ``IgammaGradA`` and
    ``RandomGammaGrad`` have no gradient in TensorFlow."""
    a, x = jnp.broadcast_arrays(*(jnp.asarray(v) for v in args))
    return [_GAMMA[node.op](a, x)]


@_reg("Polygamma")
def _polygamma(node: Node, args: list[Any]) -> list[Any]:
    """``psi^(n)(x)``, the ``n``-th derivative of the digamma function; differentiated in ``x`` only
    (TensorFlow's gradient of ``n`` is None: JAX's refuses one)."""
    n, x = jnp.broadcast_arrays(*(jnp.asarray(v) for v in args))
    return [jax.lax.polygamma(jax.lax.stop_gradient(n), x)]


# -- the normal distribution's quantile ----------------------------------------------------------------
@jax.custom_jvp
def _ndtri(p: Any) -> Any:
    wide = p.dtype if p.dtype in (np.float32, np.float64) else np.dtype(np.float32)  # (JAX's takes no halves)
    return special.ndtri(p.astype(wide)).astype(p.dtype)


@_ndtri.defjvp
def _ndtri_jvp(primals: tuple[Any], tangents: tuple[Any]) -> tuple[Any, Any]:
    """TensorFlow's ``_NdtriGrad``: ``dy * sqrt(2 pi) * exp(y ** 2 / 2)``."""
    y = _ndtri(*primals)
    return y, tangents[0] * np.sqrt(2 * np.pi).astype(y.dtype) * jnp.exp(jnp.square(y) / 2)


@_reg("Ndtri")
def _ndtri_op(node: Node, args: list[Any]) -> list[Any]:
    """The quantile of the standard normal distribution (``tf.math.ndtri``): ``-inf`` at 0, ``inf`` at 1,
    NaN outside ``[0, 1]``. (TensorFlow's kernel is Eigen's port of the same Cephes approximation; its
    float32 values differ from JAX's by a few ulp: Eigen's own ``log``.)"""
    (p,) = args
    return [_ndtri(jnp.asarray(p))]
