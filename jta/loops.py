"""Loops whose trip count the data decides, differentiable in both directions.

``jax.lax.while_loop`` has forward-mode derivatives only: reverse mode would need the steps'
intermediate values, and their number is known only at run time. TensorFlow's answer, which
``TensorArrayGradV3``'s flow chaining and its stacks exist for, is to push each step's residuals
in the forward loop and pop them in a backward loop of the same trip count. :func:`while_loop`
does that in JAX: its primal is a plain ``lax.while_loop`` (no cost when not differentiated);
its derivative runs the loop once, writing what the linearized step needs into stacks (of
``maximum_iterations`` rows, or as many as ``jta.checked`` learned: :mod:`jta._core.capacities`),
and hands the tangent to a linear loop primitive whose transpose runs the recorded number of
steps backwards (:mod:`jta._loop_linear`). The loops a derivative runs are reversible the same way
(the stack-filling loop is a loop of this module, the linear loop's transpose and JVP are linear
loops and loops of this module), so derivatives of any order compose.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, Optional, TypeVar, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import config as jax_config
from jax._src import core
from jax.custom_derivatives import SymbolicZero

from . import _loop_linear
from ._core import capacities
from ._core.inputs import static_int
from ._core.rehearsal import rehearsal
from ._records.catalogue import Error

__all__ = ["while_loop", "fori_loop"]

Carry = TypeVar("Carry")


def while_loop(cond_fun: Callable[[Carry], Any], body_fun: Callable[[Carry], Carry], init_val: Carry, *,
               maximum_iterations: Optional[int] = None) -> Carry:
    """``lax.while_loop`` that ``jax.grad`` can reverse, with ``tf.while_loop``'s ``maximum_iterations``.

    **Arguments:**

    - `cond_fun`, `body_fun`, `init_val`: as for ``jax.lax.while_loop``. The carry may hold any
      pytree: arrays, ``jta.TensorArray``s, gradient registries.
    - `maximum_iterations`: a static bound: the loop also stops after that many steps, as
      ``tf.while_loop`` does (reaching it is not an error). Reverse mode (``jax.grad``,
      ``jax.vjp``, ``jax.jacrev``, ``jax.linearize``) keeps each step's residuals on stacks:
      they have that many rows, or, under ``jta.checked``, as many as it has learned the loop
      runs (it compiles again when they run out), so there the bound is optional. The
      backward loop runs only the steps the forward loop ran.

    Forward mode, ``jax.jit``, ``jax.vmap`` (each member stops at its own step, and its
    gradient is what it would be alone), ``jax.checkpoint`` and ``jax.export`` work as for any
    JAX function, and so do derivatives of derivatives in either direction (``jax.hessian``,
    ``jax.grad(jax.grad(f))``): each loop of a derivative is one of these loops in turn.

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> def steps_to_halve(x):  # runs until the data says stop
    ...     return jta.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x, maximum_iterations=100)
    >>> jax.grad(steps_to_halve)(10.0)  # four halvings: d(x / 16) / dx
    Array(0.0625, dtype=float32, weak_type=True)

    ```
    """
    return _while(cond_fun, body_fun, init_val, _bound(maximum_iterations))


def unbounded_while_loop(cond_fun: Callable[[Carry], Any], body_fun: Callable[[Carry], Carry], init_val: Carry
                         ) -> Carry:
    """:func:`while_loop` without a bound whose derivative, outside ``jta.checked``, keeps stacks of
    :data:`~jta._core.capacities.INITIAL_ROWS` rows where :func:`while_loop` would refuse reverse mode:
    a loop that runs past them fails from compiled code (:data:`Error.LOOP_STACK_UNPLANNED`, naming
    ``jta.checked``), so reverse mode of any shorter loop runs under a bare ``jax.jit``. The importer's
    loops are these (TensorFlow differentiates a loop of any trip count); their forward mode keeps
    the stacks too."""
    return _while(cond_fun, body_fun, init_val, _Unbounded())


def _while(cond_fun: Callable[[Carry], Any], body_fun: Callable[[Carry], Carry], init_val: Carry, bound: Bound
           ) -> Carry:
    if jax_config.disable_jit.value:  # as lax.while_loop: a Python loop, which JAX differentiates op by op
        try:
            return _python_loop(cond_fun, body_fun, init_val, bound if isinstance(bound, int) else None)
        except core.ConcretizationTypeError:  # a traced condition (under vmap): the loop primitive
            pass
    cond, cond_consts = _closure_convert(cond_fun, init_val)
    body, body_consts = _closure_convert(body_fun, init_val)
    return _loop(cond, body, bound, tuple(cond_consts), tuple(body_consts), init_val)


def _python_loop(cond_fun: Callable[[Carry], Any], body_fun: Callable[[Carry], Carry], init_val: Carry,
                 bound: Optional[int]) -> Carry:
    val, steps = init_val, 0
    while (bound is None or steps < bound) and cond_fun(val):
        val, steps = body_fun(val), steps + 1
    return val


def _closure_convert(fun: Callable[[Any], Any], example: Any) -> tuple[Callable[..., Any], list[Any]]:
    """``(converted, consts)`` with ``converted(x, *consts) == fun(x)``: every value of an enclosing
    trace that ``fun`` closes over becomes an argument. (``jax.closure_convert`` hoists only
    inexact ones; an integer left inside would be used in another trace by the derivative.)"""
    closed, out_shape = jax.make_jaxpr(fun, return_shape=True)(example)
    out_tree = jax.tree_util.tree_structure(out_shape)
    hoist = [isinstance(c, core.Tracer) for c in closed.consts]
    kept = [None if h else c for c, h in zip(closed.consts, hoist, strict=True)]

    def converted(x: Any, *hoisted: Any) -> Any:
        it = iter(hoisted)
        consts = [next(it) if h else c for c, h in zip(kept, hoist, strict=True)]
        out = core.eval_jaxpr(closed.jaxpr, consts, *jax.tree_util.tree_leaves(x))
        return jax.tree_util.tree_unflatten(out_tree, out)

    return converted, [c for c, h in zip(closed.consts, hoist, strict=True) if h]


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Carry], Carry], init_val: Carry, *,
              maximum_iterations: Optional[int] = None) -> Carry:
    """``lax.fori_loop`` that ``jax.grad`` can reverse when its bounds are traced.

    With static bounds this is ``lax.fori_loop`` (a ``lax.scan``, reversible as it is). With
    traced ones it is :func:`while_loop` over ``i`` from ``lower`` to ``upper`` (whose reverse
    mode needs ``maximum_iterations`` or ``jta.checked``).

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> def power(x, n):  # x ** n for a traced n
    ...     return jta.fori_loop(0, n, lambda i, v: v * x, 1.0, maximum_iterations=16)
    >>> jax.jit(jax.grad(power))(2.0, 3)
    Array(12., dtype=float32, weak_type=True)

    ```
    """
    lo, hi = static_int(lower), static_int(upper)
    if lo is not None and hi is not None:
        bound = _bound(maximum_iterations)
        if bound is not None:
            hi = max(lo, min(hi, lo + bound))
        return lax.fori_loop(lo, hi, body_fun, init_val)
    dtype = jnp.result_type(lower, upper)
    lower, upper = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    _, out = while_loop(lambda s: s[0] < upper, lambda s: (s[0] + 1, body_fun(s[0], s[1])), (lower, init_val),
                        maximum_iterations=maximum_iterations)
    return out


def _bound(maximum_iterations: Any) -> Optional[int]:
    if maximum_iterations is None:
        return None
    bound = static_int(maximum_iterations)
    if bound is None or isinstance(maximum_iterations, bool):
        Error.LOOP_BOUND_NOT_STATIC.raise_(given=repr(maximum_iterations))
    if bound < 0:
        Error.LOOP_BOUND_NEGATIVE.raise_(bound=bound)
    return bound


# -- the primal: a plain while loop -------------------------------------------------------------
def _run(cond: Callable[..., Any], body: Callable[..., Any], bound: Optional[int], cond_consts: tuple[Any, ...],
         body_consts: tuple[Any, ...], init: Any) -> tuple[Any, Any]:
    """``(trip count, final carry)``."""
    def go_on(state: tuple[Any, Any]) -> Any:
        i, x = state
        more = cond(x, *cond_consts)
        return more if bound is None else jnp.logical_and(more, i < bound)

    def step(state: tuple[Any, Any]) -> tuple[Any, Any]:
        i, x = state
        return i + 1, body(x, *body_consts)

    return lax.while_loop(go_on, step, (jnp.zeros((), jnp.int32), init))


class _Unbounded(NamedTuple):
    """The ``bound`` of :func:`unbounded_while_loop`'s loops: none, and outside ``jta.checked`` the
    stacks of its reverse mode have :data:`~jta._core.capacities.INITIAL_ROWS` rows (running past
    them fails from compiled code, :data:`Error.LOOP_STACK_UNPLANNED`)."""


class _Sized(NamedTuple):
    """The ``bound`` of a loop that a derivative runs (the forward loop that fills the stacks,
    the tangent loop's JVP): its condition stops it within ``rows`` steps (or the loop it derives
    from reports that its plan ran out), so its primal has no counter and its own derivative's
    stacks have ``rows`` rows, with no plan entry."""

    rows: int


Bound = Union[int, _Sized, _Unbounded, None]


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _loop(cond: Any, body: Any, bound: Bound, cond_consts: tuple[Any, ...], body_consts: tuple[Any, ...],
          init: Any) -> Any:
    if not isinstance(bound, int):  # no counter: exactly lax.while_loop
        return lax.while_loop(lambda x: cond(x, *cond_consts), lambda x: body(x, *body_consts), init)
    return _run(cond, body, bound, cond_consts, body_consts, init)[1]


def _sized_while(cond: Any, body: Any, init: Any, rows: int, cond_consts: tuple[Any, ...],
                 body_consts: tuple[Any, ...]) -> Any:
    """The loops of derivatives, reversible in turn: ``cond(state, *cond_consts)``,
    ``body(state, *body_consts)`` (what they use of an enclosing trace comes in as consts)."""
    return _loop(cond, body, _Sized(rows), tuple(cond_consts), tuple(body_consts), init)


_loop_linear.use_reversible_while(_sized_while)


# -- the derivative: residuals pushed forward, a linear loop for the tangent -------------------
def _inexact(x: Any) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jnp.inexact)


@functools.partial(_loop.defjvp, symbolic_zeros=True)
def _loop_jvp(cond: Any, body: Any, bound: Bound, primals: tuple[Any, ...], tangents: tuple[Any, ...]
              ) -> tuple[Any, Any]:
    cond_consts, body_consts, init = primals
    _, t_body_consts, t_init = tangents
    if isinstance(bound, _Sized):  # a derivative's loop: it knows its rows
        rows, loop, limit = bound.rows, None, None
    else:
        limit = bound if isinstance(bound, int) else None
        steps = _concrete_steps(cond, body, cond_consts, body_consts, init) if limit is None else None
        if steps is not None:  # eager code: the loop's length is known before it is differentiated
            rows, loop, limit = steps, None, None
        elif bound is None and not capacities.active():
            return _forward_mode(cond, body, cond_consts, body_consts, init, t_body_consts, t_init)
        else:
            rows, loop = capacities.rows_for(limit, unplanned=isinstance(bound, _Unbounded))
    x_leaves, x_tree = jax.tree_util.tree_flatten(init)
    k_leaves = list(body_consts)
    # Every inexact leaf of the carry has a tangent (a step may make a zero one nonzero); of the
    # consts, only those with a tangent that is not a symbolic zero (the others are constants
    # of the step, which keeps the linear step and its residuals small).
    x_diff = [_inexact(x) for x in x_leaves]
    k_diff = [_inexact(k) and not isinstance(t, SymbolicZero) for k, t in zip(k_leaves, t_body_consts, strict=True)]

    def linearized(x: list[Any], ks: list[Any]) -> tuple[list[Any], Any]:
        """The step at carry ``x`` and consts ``ks``: its output leaves, and the linear map of the
        differentiable leaves (carry, then consts) as a ``Partial`` whose leaves are the residuals."""
        def f(xd: list[Any], kd: list[Any]) -> tuple[list[Any], list[Any]]:
            xs, kx = _merge(x, xd, x_diff), _merge(ks, kd, k_diff)
            out = jax.tree_util.tree_leaves(body(jax.tree_util.tree_unflatten(x_tree, xs), *kx))
            return _pick(out, x_diff), _pick(out, [not d for d in x_diff])
        out_d, lin, out_rest = jax.linearize(f, _pick(x, x_diff), _pick(ks, k_diff), has_aux=True)
        return _merge(out_rest, out_d, x_diff, fill_rest=True), lin

    # Trace one step abstractly to learn the residuals' shapes, and which are loop invariant (a
    # const of the body, or a constant: values from outside the step, kept from this trace):
    # only the others are stacked.
    plan: dict[str, Any] = {}

    def probe(x: list[Any]) -> list[Any]:
        _, lin = linearized(x, k_leaves)
        res, plan["tree"] = jax.tree_util.tree_flatten(lin)
        plan["invariant"] = [_invariant(r, k_leaves) for r in res]
        plan["invariants"] = [r for r, inv in zip(res, plan["invariant"], strict=True) if inv]
        return [r for r, inv in zip(res, plan["invariant"], strict=True) if not inv]

    stacked_avals = jax.eval_shape(probe, x_leaves)
    invariant_flags, invariants = plan["invariant"], plan["invariants"]
    # One spare row: writes past ``rows`` (a plan's guess that ran out) clamp onto it, and it
    # keeps a stack's shape from matching a ``[T, ...]`` input's, which XLA:CPU would fuse with
    # the input's per-step slice into a loop that rewrites the whole stack each step (measured:
    # 1.9x the time of lax.scan's gradient with ``rows == T``, 1.03x with ``rows + 1``).
    stacks0 = [jnp.zeros((rows + 1, *a.shape), a.dtype) for a in stacked_avals]

    def go_on(state: tuple[Any, list[Any], list[Any]], *cond_consts: Any) -> Any:
        i, x, _ = state
        more = cond(jax.tree_util.tree_unflatten(x_tree, x), *cond_consts)
        return more if limit is None else jnp.logical_and(more, i < limit)

    def step(state: tuple[Any, list[Any], list[Any]], *ks: Any) -> tuple[Any, list[Any], list[Any]]:
        i, x, stacks = state
        out, lin = linearized(x, list(ks))
        pushed = [r for r, inv in zip(jax.tree_util.tree_leaves(lin), invariant_flags, strict=True) if not inv]
        # Past the stacks' rows the loop runs on to count its steps (the record below makes
        # jta.checked rerun), writing onto the spare row.
        stacks = [lax.dynamic_update_slice_in_dim(s, r.astype(s.dtype)[None], i, 0)
                  for s, r in zip(stacks, pushed, strict=True)]
        return i + 1, out, stacks

    # A loop that reverse mode reverses in turn (its primal is a plain lax.while_loop), for
    # reverse over reverse: it runs at most ``rows`` steps where its result counts.
    n, x_out, stacks = _sized_while(go_on, step, (jnp.zeros((), jnp.int32), x_leaves, stacks0), rows,
                                    tuple(cond_consts), tuple(k_leaves))
    if loop is not None:
        capacities.report_full(loop, n, rows, "jta.while_loop")
    tree = plan["tree"]

    def lin_step(i: Any, n: Any, *args: Any) -> list[Any]:
        stk, inv = args[:len(stacks)], args[len(stacks):len(stacks) + len(invariants)]
        rest = args[len(stacks) + len(invariants):]
        n_kd = sum(k_diff)
        kd, xd = list(rest[:n_kd]), list(rest[n_kd:])
        popped = iter(lax.dynamic_index_in_dim(s, i, 0, keepdims=False) for s in stk)
        invs = iter(inv)
        res = [next(invs) if flag else next(popped) for flag in invariant_flags]
        return list(jax.tree_util.tree_unflatten(tree, res)(xd, kd))

    t_x = [_instantiate(t, x) for t, x in zip(_pick(jax.tree_util.tree_leaves(t_init), x_diff), _pick(x_leaves, x_diff),
                                              strict=True)]
    t_k = _pick(list(t_body_consts), k_diff)
    consts = [*stacks, *invariants]
    step_jaxpr = jax.make_jaxpr(lin_step)(n, n, *consts, *t_k, *t_x)
    t_out = _loop_linear.bind(step_jaxpr, n, consts, t_k, t_x, rows=rows)
    x_out_tree = jax.tree_util.tree_unflatten(x_tree, x_out)
    t_full = _merge([_zero_tangent(x) for x in x_out], t_out, x_diff)
    return x_out_tree, jax.tree_util.tree_unflatten(x_tree, t_full)


def _concrete_steps(cond: Any, body: Any, cond_consts: tuple[Any, ...], body_consts: tuple[Any, ...], init: Any
                    ) -> Optional[int]:
    """The trip count of a loop whose inputs are all concrete (eager code, as in TensorFlow's eager
    ``GradientTape``: its stacks then need exactly that many rows), else ``None``."""
    if any(isinstance(x, core.Tracer) for x in jax.tree_util.tree_leaves((cond_consts, body_consts, init))):
        return None
    with rehearsal():  # (the run that fills the stacks is the program's: its prints are the ones shown)
        return int(_run(cond, body, None, cond_consts, body_consts, init)[0])


def _forward_mode(cond: Any, body: Any, cond_consts: tuple[Any, ...], body_consts: tuple[Any, ...], init: Any,
                  t_body_consts: tuple[Any, ...], t_init: Any) -> tuple[Any, Any]:
    """An unbounded loop outside ``jta.checked``: the tangent rides along in the loop (JAX's own
    ``while_loop`` JVP), which is all forward mode needs and stores nothing; transposing it, for
    reverse mode, raises :data:`Error.LOOP_NEEDS_BOUND`."""
    def loop(k: tuple[Any, ...], x: Any) -> Any:
        return lax.while_loop(lambda v: cond(v, *cond_consts), lambda v: body(v, *k), x)

    zeros = lambda ts, xs: jax.tree_util.tree_map(  # noqa: E731
        _instantiate, ts, xs, is_leaf=lambda t: isinstance(t, SymbolicZero))
    out, t_out = jax.jvp(loop, (body_consts, init), (zeros(t_body_consts, body_consts), zeros(t_init, init)))
    leaves, tree = jax.tree_util.tree_flatten(t_out)
    diff = [_inexact(x) for x in jax.tree_util.tree_leaves(out)]
    guarded = iter(_loop_linear.forward_only(_pick(leaves, diff), _needs_bound))
    return out, jax.tree_util.tree_unflatten(tree, [next(guarded) if d else t for t, d in zip(leaves, diff, strict=True)])


def _needs_bound() -> None:
    Error.LOOP_NEEDS_BOUND.raise_()


def _invariant(r: Any, consts: list[Any]) -> bool:
    return not isinstance(r, core.Tracer) or any(r is k for k in consts)


def _pick(xs: list[Any], mask: list[bool]) -> list[Any]:
    return [x for x, m in zip(xs, mask, strict=True) if m]


def _merge(base: list[Any], picked: list[Any], mask: list[bool], fill_rest: bool = False) -> list[Any]:
    """``base`` with the masked positions taken from ``picked`` in order; with ``fill_rest``,
    ``base`` holds only the unmasked positions."""
    it, rest = iter(picked), iter(base)
    if fill_rest:
        return [next(it) if m else next(rest) for m in mask]
    return [next(it) if m else b for b, m in zip(base, mask, strict=True)]


def _instantiate(t: Any, x: Any) -> Any:
    """The tangent ``t`` of ``x``, a symbolic zero made an array (``float0`` for integers)."""
    return _zero_tangent(x) if isinstance(t, SymbolicZero) else t


def _zero_tangent(x: Any) -> Any:
    if _inexact(x):
        return jnp.zeros(jnp.shape(x), jnp.result_type(x))
    return np.zeros(np.shape(x), jax.dtypes.float0)
