"""Special functions: ``tf.math.betainc``, ``tf.math.zeta`` and the modified Bessel functions
(``tf.math.bessel_i0``, ``bessel_i0e``, ``bessel_i1``, ``bessel_i1e``), as ``jax.scipy.special``'s.

Their derivatives are TensorFlow's registered gradients: ``betainc`` is differentiated in ``x`` only
and ``zeta`` in ``q`` only (TensorFlow returns None for the other operands), so those operands are
constants to ``jax.grad`` here; ``bessel_i0`` and ``bessel_i1`` take TensorFlow's formulas at 0.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.special as special

from ._nodes import Node
from ._ops import OPS, registrar

_reg = registrar(OPS)

@jax.custom_jvp
def _i0(x: Any) -> Any:
    return special.i0(x)


@jax.custom_jvp
def _i1(x: Any) -> Any:
    return special.i1(x)


# TensorFlow's gradients: I0' = I1 (JAX's rule of exp(|x|) i0e(x) gives |x|'s 1 at 0), and I1' =
# I0 - I1 / x with 1 at 0 (TensorFlow's choice; the limit is 1/2)
_i0.defjvp(lambda primals, tangents: (_i0(primals[0]), special.i1(primals[0]) * tangents[0]))
_i1.defjvp(lambda primals, tangents: (_i1(primals[0]), jnp.where(
    primals[0] == 0, 1.0, special.i0(primals[0]) - special.i1(primals[0]) / jnp.where(primals[0] == 0, 1.0, primals[0]))
    .astype(tangents[0].dtype) * tangents[0]))

_BESSEL = {"BesselI0": _i0, "BesselI0e": special.i0e, "BesselI1": _i1, "BesselI1e": special.i1e}


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
