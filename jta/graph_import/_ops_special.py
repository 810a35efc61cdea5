"""Special functions: ``tf.math.betainc``, ``tf.math.zeta`` and the modified Bessel functions
(``tf.math.bessel_i0``, ``bessel_i0e``, ``bessel_i1``, ``bessel_i1e``), as ``jax.scipy.special``'s.

Their derivatives are TensorFlow's registered gradients: ``betainc`` is differentiated in ``x`` only
and ``zeta`` in ``q`` only (TensorFlow returns None for the other operands), so those operands are
constants to ``jax.grad`` here; ``bessel_i0`` and ``bessel_i1`` take TensorFlow's formulas at 0
(:mod:`._derivatives`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as special

from . import _derivatives
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
