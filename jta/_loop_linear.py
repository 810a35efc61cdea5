"""The tangent of a data-dependent loop: a linear loop primitive whose transpose runs backwards.

``jta.while_loop``'s derivative (:mod:`jta.loops`) runs the primal loop once, pushing each
step's residuals onto stacks, and hands the tangent to :data:`loop_linear_p`: ``n`` steps of a
linear map, step ``i`` reading row ``i`` of the stacks. The primitive exists for its transpose,
which JAX's ``while_loop`` lacks: the same ``n`` steps, last to first, each the transpose of the
step, so ``jax.grad`` of a loop costs the steps it ran, as TensorFlow's gradient of a
``tf.while_loop`` does (``while_v2``'s accumulators, popped in a reverse loop). It mirrors how
``lax.scan`` splits and transposes its body (``jax/_src/lax/control_flow/loops.py``), with the
trip count a run-time operand.

Operands: ``n`` (the trip count: a scalar, or one per member once batched), then ``consts``
(stacks and loop-invariant residuals, never differentiated by the transpose), then the linear
``tangent_consts`` and ``tangent_carry``. ``step(i, n, *consts, *tangent_consts,
*tangent_carry) -> tangent_carry`` is a closed jaxpr, linear in its last two groups; with
``masked`` it keeps the carry where ``i >= n`` (what batching members with different trip
counts needs).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import core
from jax._src.interpreters import ad, batching, mlir

__all__ = ["loop_linear_p", "bind", "forward_only"]

loop_linear_p = core.Primitive("jta_loop_linear")
loop_linear_p.multiple_results = True


def bind(step: core.ClosedJaxpr, n: Any, consts: list[Any], tangent_consts: list[Any], tangent_carry: list[Any],
         masked: bool = False) -> list[Any]:
    return loop_linear_p.bind(n, *consts, *tangent_consts, *tangent_carry, step=step, num_consts=len(consts),
                              num_tangent_consts=len(tangent_consts), masked=masked)


def _split(args: Any, num_consts: int, num_tangent_consts: int) -> tuple[Any, list[Any], list[Any], list[Any]]:
    n, *rest = args
    k, m = num_consts, num_consts + num_tangent_consts
    return n, list(rest[:k]), list(rest[k:m]), list(rest[m:])


def _apply(step: core.ClosedJaxpr, masked: bool, i: Any, n: Any, consts: list[Any], tc: list[Any],
           carry: list[Any]) -> list[Any]:
    new = core.jaxpr_as_fun(step)(i, n, *consts, *tc, *carry)
    if not masked:
        return new
    live = i < n  # one flag per member; a member past its trip count keeps its carry
    return [jnp.where(live.reshape(live.shape + (1,) * (c.ndim - live.ndim)), a, c) for a, c in zip(new, carry, strict=True)]


def _impl(*args: Any, step: core.ClosedJaxpr, num_consts: int, num_tangent_consts: int, masked: bool) -> list[Any]:
    n, consts, tc, carry = _split(args, num_consts, num_tangent_consts)
    last = jnp.max(n)

    def body(state: tuple[Any, list[Any]]) -> tuple[Any, list[Any]]:
        i, c = state
        return i + 1, _apply(step, masked, i, n, consts, tc, c)

    return lax.while_loop(lambda s: s[0] < last, body, (jnp.zeros((), last.dtype), carry))[1]


def _abstract_eval(*avals: Any, step: core.ClosedJaxpr, num_consts: int, num_tangent_consts: int, masked: bool
                   ) -> tuple[list[Any], Any]:
    del masked
    return list(avals[1 + num_consts + num_tangent_consts:]), step.effects


loop_linear_p.def_impl(_impl)
loop_linear_p.def_effectful_abstract_eval(_abstract_eval)
mlir.register_lowering(loop_linear_p, mlir.lower_fun(_impl, multiple_results=True))


def _transpose(cts: list[Any], *args: Any, step: core.ClosedJaxpr, num_consts: int, num_tangent_consts: int,
               masked: bool) -> list[Any]:
    """The steps last to first, each the transpose of ``step`` in its undefined linear operands
    (a tangent const given as a value is a constant of the transposed step)."""
    n, consts, tc, carry = _split(args, num_consts, num_tangent_consts)
    assert not any(ad.is_undefined_primal(x) for x in (n, *consts)), "the stacks are not linear"
    unknown = [ad.is_undefined_primal(x) for x in tc]
    tc_avals = [x.aval for x in tc if ad.is_undefined_primal(x)]
    carry_avals = [x.aval for x in carry]
    ct_carry = [jnp.zeros(a.shape, a.dtype) if type(ct) is ad.Zero else ct for ct, a in zip(cts, carry_avals, strict=True)]
    zeros = lambda avals: [jnp.zeros(a.shape, a.dtype) for a in avals]  # noqa: E731

    def body(state: tuple[Any, list[Any], list[Any]]) -> tuple[Any, list[Any], list[Any]]:
        i, ct_c, acc = state

        def lin(tc_unknown: list[Any], c: list[Any]) -> list[Any]:
            it = iter(tc_unknown)
            full = [next(it) if u else x for x, u in zip(tc, unknown, strict=True)]
            return _apply(step, masked, i, n, consts, full, c)

        g_tc, g_c = jax.linear_transpose(lin, zeros(tc_avals), zeros(carry_avals))(ct_c)
        return i - 1, list(g_c), [a + g for a, g in zip(acc, g_tc, strict=True)]

    last = jnp.max(n)
    _, ct_c, ct_k = lax.while_loop(lambda s: s[0] >= 0, body, (last - 1, ct_carry, zeros(tc_avals)))
    it = iter(ct_k)
    return [None] * (1 + num_consts) + [next(it) if u else None for u in unknown] + list(ct_c)


ad.primitive_transposes[loop_linear_p] = _transpose


def _jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    """Forward mode over the tangent loop (second derivatives): JAX's own ``while_loop`` JVP."""
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    out, dout = jax.jvp(lambda *a: _impl(*a, **params), tuple(primals), tuple(tangents))
    return out, dout


ad.primitive_jvps[loop_linear_p] = _jvp


def _batch(args: list[Any], dims: list[Any], *, step: core.ClosedJaxpr, num_consts: int, num_tangent_consts: int,
           masked: bool) -> tuple[list[Any], list[Any]]:
    """Members run their own trip counts: the step is batched and masked (``masked=True``); the
    carry is batched whenever anything is, since a batched step makes it so."""
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    n, consts, tc, carry = _split(list(args), num_consts, num_tangent_consts)
    n_d, consts_d, tc_d, carry_d = _split(list(dims), num_consts, num_tangent_consts)
    moved = lambda x, d: x if d is None else jnp.moveaxis(x, d, 0)  # noqa: E731
    axis = lambda d: None if d is None else 0  # noqa: E731
    carry = [jnp.broadcast_to(x, (size, *x.shape)) if d is None else moved(x, d)
             for x, d in zip(carry, carry_d, strict=True)]
    n = jnp.broadcast_to(n, (size, *n.shape)) if n_d is None else moved(n, n_d)
    consts = [moved(x, d) for x, d in zip(consts, consts_d, strict=True)]
    tc = [moved(x, d) for x, d in zip(tc, tc_d, strict=True)]
    in_axes = (None, 0, *(axis(d) for d in consts_d), *(axis(d) for d in tc_d), *([0] * len(carry)))
    batched = jax.make_jaxpr(jax.vmap(core.jaxpr_as_fun(step), in_axes=in_axes))(
        jnp.zeros((), n.dtype), n, *consts, *tc, *carry)
    out = bind(batched, n, consts, tc, carry, masked=True)
    return out, [0] * len(out)


batching.primitive_batchers[loop_linear_p] = _batch


# -- a tangent that reverse mode may not transpose ----------------------------------------------
forward_only_p = core.Primitive("jta_forward_only")
forward_only_p.multiple_results = True
forward_only_p.def_impl(lambda *xs, refusal: list(xs))
forward_only_p.def_abstract_eval(lambda *avals, refusal: list(avals))
mlir.register_lowering(forward_only_p, lambda ctx, *xs, refusal: list(xs))
batching.primitive_batchers[forward_only_p] = lambda args, dims, refusal: (forward_only_p.bind(*args, refusal=refusal),
                                                                           list(dims))


def forward_only(tangents: list[Any], refusal: Any) -> list[Any]:
    """``tangents`` unchanged; transposing them (reverse mode) raises ``refusal()`` instead of
    JAX's error about the loop that made them."""
    return forward_only_p.bind(*tangents, refusal=refusal) if tangents else []


def _refuse(cts: Any, *xs: Any, refusal: Any) -> Any:
    refusal()


ad.deflinear2(forward_only_p, _refuse)
