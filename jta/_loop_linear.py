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
*tangent_carry) -> tangent_carry`` is a closed jaxpr, linear in its last two groups; the steps
run ``i = 0 .. max(n) - 1``, or down from ``max(n) - 1`` with ``reverse``. With ``masked`` (``n``
has a leading member axis) a member keeps its carry once ``i`` is past its trip count (what
batching members with different trip counts needs). ``rows`` is a static bound on the trip count
(the stacks' rows), which sizes the stacks of the primitive's own derivative.

The transpose is again this primitive (the steps the other way, each transposed), and its JVP a
loop that ``jax.grad`` reverses, so derivatives of any order compose: ``jax.grad(jax.grad(f))``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import core
from jax._src.ad_util import zeros_like_aval
from jax._src.interpreters import ad, batching, mlir

__all__ = ["loop_linear_p", "bind", "forward_only", "use_reversible_while"]

loop_linear_p = core.Primitive("jta_loop_linear")
loop_linear_p.multiple_results = True

# ``jta.loops``'s while loop that reverse mode can differentiate, with stacks of a given number of
# rows (``jta.loops`` imports this module, so it hands the loop over): ``(cond, body, init, rows,
# cond_consts, body_consts)``, ``cond(state, *cond_consts)``, ``body(state, *body_consts)``.
_reversible_while: Optional[Callable[..., Any]] = None


def use_reversible_while(loop: Callable[..., Any]) -> None:
    global _reversible_while
    _reversible_while = loop


def bind(step: core.ClosedJaxpr, n: Any, consts: list[Any], tangent_consts: list[Any], tangent_carry: list[Any], *,
         rows: int, masked: bool = False, reverse: bool = False) -> list[Any]:
    return loop_linear_p.bind(n, *consts, *tangent_consts, *tangent_carry, step=step, num_consts=len(consts),
                              num_tangent_consts=len(tangent_consts), masked=masked, reverse=reverse, rows=rows)


def _split(args: Any, num_consts: int, num_tangent_consts: int) -> tuple[Any, list[Any], list[Any], list[Any]]:
    n, *rest = args
    k, m = num_consts, num_consts + num_tangent_consts
    return n, list(rest[:k]), list(rest[k:m]), list(rest[m:])


def _apply(step: core.ClosedJaxpr, masked: bool, i: Any, n: Any, consts: list[Any], tc: list[Any],
           carry: list[Any]) -> list[Any]:
    new = core.jaxpr_as_fun(step)(i, n, *consts, *tc, *carry)
    if not masked:
        return new
    # One flag per member (the leading axis); a member past its trip count keeps its carry. A
    # member's own ``n`` has more axes when it was batched before: the step masks those itself.
    live = i < (jnp.max(n, axis=tuple(range(1, n.ndim))) if n.ndim > 1 else n)
    return [jnp.where(live.reshape(live.shape + (1,) * (c.ndim - 1)), a, c) for a, c in zip(new, carry, strict=True)]


def _run(run_while: Callable[..., Any], *args: Any, step: core.ClosedJaxpr, num_consts: int,
         num_tangent_consts: int, masked: bool, reverse: bool) -> list[Any]:
    """The loop, by ``run_while(cond, body, init, cond_consts, body_consts)``."""
    n, consts, tc, carry = _split(args, num_consts, num_tangent_consts)
    last = jnp.max(n)
    nk = len(consts)

    def go_on(state: tuple[Any, list[Any]], last: Any) -> Any:
        return state[0] >= 0 if reverse else state[0] < last

    def body(state: tuple[Any, list[Any]], n: Any, *rest: Any) -> tuple[Any, list[Any]]:
        i, c = state
        return i + (-1 if reverse else 1), _apply(step, masked, i, n, list(rest[:nk]), list(rest[nk:]), c)

    start = last - 1 if reverse else jnp.zeros((), last.dtype)
    return run_while(go_on, body, (start, carry), (last,), (n, *consts, *tc))[1]


def _lax_while(cond: Any, body: Any, init: Any, cond_consts: tuple[Any, ...], body_consts: tuple[Any, ...]) -> Any:
    return lax.while_loop(lambda s: cond(s, *cond_consts), lambda s: body(s, *body_consts), init)


def _impl(*args: Any, rows: int, **params: Any) -> list[Any]:
    del rows
    return _run(_lax_while, *args, **params)


def _abstract_eval(*avals: Any, step: core.ClosedJaxpr, num_consts: int, num_tangent_consts: int, **_: Any
                   ) -> tuple[list[Any], Any]:
    return list(avals[1 + num_consts + num_tangent_consts:]), step.effects


loop_linear_p.def_impl(_impl)
loop_linear_p.def_effectful_abstract_eval(_abstract_eval)
# Undifferentiated, the primitive is a plain lax.while_loop (the reversible form only in its JVP).
mlir.register_lowering(loop_linear_p, mlir.lower_fun(_impl, multiple_results=True))


def _struct(a: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)


def _transpose(cts: list[Any], *args: Any, step: core.ClosedJaxpr, num_consts: int, num_tangent_consts: int,
               masked: bool, reverse: bool, rows: int) -> list[Any]:
    """The same steps the other way, each the transpose of the step in its undefined linear
    operands: again this primitive, carrying the carry's cotangent and the sums of the undefined
    tangent consts' (a tangent const given as a value is a const of the transposed loop), so its
    own transpose and JVP are this module's too."""
    n, consts, tc, carry = _split(args, num_consts, num_tangent_consts)
    assert not any(ad.is_undefined_primal(x) for x in (n, *consts)), "the stacks are not linear"
    unknown = [ad.is_undefined_primal(x) for x in tc]
    known = [x for x, u in zip(tc, unknown, strict=True) if not u]
    tc_avals = [x.aval for x in tc if ad.is_undefined_primal(x)]
    carry_avals = [x.aval for x in carry]
    ct_carry = [zeros_like_aval(a) if type(ct) is ad.Zero else ct for ct, a in zip(cts, carry_avals, strict=True)]
    nk, nq, nc = len(consts), len(known), len(carry_avals)

    def t_step(i: Any, n: Any, *rest: Any) -> list[Any]:
        consts, known, ct_c, acc = rest[:nk], rest[nk:nk + nq], rest[nk + nq:nk + nq + nc], rest[nk + nq + nc:]

        def lin(tc_unknown: list[Any], c: list[Any]) -> list[Any]:
            it, kt = iter(tc_unknown), iter(known)
            full = [next(it) if u else next(kt) for u in unknown]
            return _apply(step, masked, i, n, list(consts), full, c)

        # The transpose of the masked step: a tangent const shared by the members (unbatched)
        # sums their cotangents, so only the step can leave out those of members that are done
        # (its accumulator has no member axis for the primitive to mask); the loop is unmasked.
        g_tc, g_c = jax.linear_transpose(lin, [_struct(a) for a in tc_avals], [_struct(a) for a in carry_avals])(list(ct_c))
        return [*g_c, *(a + g for a, g in zip(acc, g_tc, strict=True))]

    t_jaxpr = jax.make_jaxpr(t_step)(jax.ShapeDtypeStruct((), n.dtype), n, *consts, *known,
                                     *(_struct(a) for a in carry_avals), *(_struct(a) for a in tc_avals))
    acc0 = [zeros_like_aval(a) for a in tc_avals]  # weak types kept: the cotangent is the const's type
    out = bind(t_jaxpr, n, [*consts, *known], [], [*ct_carry, *acc0], rows=rows, masked=False, reverse=not reverse)
    ct_c, ct_k = out[:nc], iter(out[nc:])
    return [None] * (1 + num_consts) + [next(ct_k) if u else None for u in unknown] + list(ct_c)


ad.primitive_transposes[loop_linear_p] = _transpose


def _jvp(primals: list[Any], tangents: list[Any], *, rows: int, **params: Any) -> tuple[list[Any], list[Any]]:
    """The JVP of the loop run as ``jta.while_loop``'s reversible loop (stacks of ``rows``
    rows): its tangent is again this primitive, which reverse mode transposes (reverse over
    reverse), where JAX's own ``while_loop`` JVP would give a loop it cannot."""
    assert _reversible_while is not None, "jta.loops hands over its loop on import"
    loop = _reversible_while

    def run_while(cond: Any, body: Any, init: Any, cond_consts: tuple[Any, ...], body_consts: tuple[Any, ...]) -> Any:
        return loop(cond, body, init, rows, cond_consts, body_consts)

    nonzero = [type(t) is not ad.Zero for t in tangents]

    def run(*diff: Any) -> list[Any]:
        # Operands without a tangent stay out of the JVP: constants of the loop, not stacked
        it = iter(diff)
        return _run(run_while, *(next(it) if z else p for p, z in zip(primals, nonzero, strict=True)), **params)

    pick = lambda xs: tuple(x for x, z in zip(xs, nonzero, strict=True) if z)  # noqa: E731
    out, dout = jax.jvp(run, pick(primals), pick(tangents))
    return out, dout


ad.primitive_jvps[loop_linear_p] = _jvp


def _batch(args: list[Any], dims: list[Any], *, step: core.ClosedJaxpr, num_consts: int, num_tangent_consts: int,
           masked: bool, reverse: bool, rows: int) -> tuple[list[Any], list[Any]]:
    """Members run their own trip counts: the step is batched and masked (``masked=True``) when
    ``n`` is (members that share it need no mask); the carry is batched whenever anything is,
    since a batched step makes it so. A loop masked already (batched before) has its mask moved
    into the batched step."""
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    n, consts, tc, carry = _split(list(args), num_consts, num_tangent_consts)
    n_d, consts_d, tc_d, carry_d = _split(list(dims), num_consts, num_tangent_consts)
    moved = lambda x, d: x if d is None else jnp.moveaxis(x, d, 0)  # noqa: E731
    axis = lambda d: None if d is None else 0  # noqa: E731
    carry = [jnp.broadcast_to(x, (size, *x.shape)) if d is None else moved(x, d)
             for x, d in zip(carry, carry_d, strict=True)]
    n = moved(n, n_d)
    consts = [moved(x, d) for x, d in zip(consts, consts_d, strict=True)]
    tc = [moved(x, d) for x, d in zip(tc, tc_d, strict=True)]
    nk, nt = len(consts), len(tc)

    def member(i: Any, n: Any, *rest: Any) -> list[Any]:
        return _apply(step, masked, i, n, list(rest[:nk]), list(rest[nk:nk + nt]), list(rest[nk + nt:]))

    in_axes = (None, axis(n_d), *(axis(d) for d in consts_d), *(axis(d) for d in tc_d), *([0] * len(carry)))
    batched = jax.make_jaxpr(jax.vmap(member, in_axes=in_axes))(jnp.zeros((), n.dtype), n, *consts, *tc, *carry)
    out = bind(batched, n, consts, tc, carry, rows=rows, masked=n_d is not None, reverse=reverse)
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
